/* The built-in calibration text of the int8 mode (model/smooth.h): what the
 * per-channel activation maxima of SmoothQuant's smoothing are measured on.
 * Polish and English in the register Basal models read (customer messages,
 * bank and shop support, contracts, a question about them), a few hundred
 * tokens; written for this project. Changing one byte changes the smoothing
 * and so the int8 weights: bump BS_INT8_CALIB_VERSION (the quantized-weights
 * cache key holds it, and a hash of the tokens). */
#include "model/smooth.h"

const char bs_int8_calib_text[] =
    "Dzień dobry, piszę w sprawie zamówienia nr 48213 z 3 listopada. Paczka miała dotrzeć w piątek, ale "
    "kurier zostawił awizo, choć cały dzień byłam w domu. Proszę o ponowną dostawę albo zwrot pieniędzy na "
    "kartę, z której płaciłam (1 249,99 zł). W załączniku przesyłam zdjęcie etykiety i fakturę.\n"
    "Szanowni Państwo, od wczoraj nie mogę zalogować się do bankowości internetowej: po wpisaniu hasła "
    "aplikacja prosi o kod SMS, który nie przychodzi. Czy to awaria, czy moje konto zostało zablokowane? "
    "Mam jutro termin płatności raty kredytu i nie chcę płacić odsetek za opóźnienie.\n"
    "Umowa najmu lokalu użytkowego, § 7. Najemca zapłaci karę umowną w wysokości 0,5% miesięcznego czynszu "
    "za każdy dzień zwłoki w wydaniu lokalu, nie więcej niż 20% kwoty kaucji. Wypowiedzenie wymaga formy "
    "pisemnej pod rygorem nieważności.\n"
    "Pytanie: czy klient prosi o zwrot pieniędzy? Odpowiedz jedną literą: A (tak) albo B (nie).\n"
    "Hello, I was charged twice for my subscription this month (two payments of $14.99 on the 2nd and the "
    "4th). I only have one account. Please refund the duplicate charge and confirm by email; my order "
    "reference is QX-7730.\n"
    "Hi team, the mobile app crashes every time I open the transfer screen after the last update. I am on "
    "Android 14. I need to pay my landlord before Friday, so any workaround would help.\n"
    "Clause 12.3: The supplier shall remedy any defect reported within the warranty period of 24 months at "
    "no cost to the customer, and shall respond to a critical incident within four hours.\n"
    "Question: how urgent is this message? Choose one: low, medium, high, critical.";

const int bs_int8_calib_text_len = (int)sizeof bs_int8_calib_text - 1;
