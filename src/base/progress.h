/* Progress of long work on stderr (issue 18 item 4): writing a model, reading
 * weights, benchmarks, the GEMM search.
 *
 * On a terminal: one line redrawn in place (a bar, percent, amounts, for
 * bytes the rate, elapsed and remaining time), at most 10 times a second, ended with a newline when
 * the work is done. Elsewhere (a log file, a pipe, journald): one timestamped
 * line every BASAL_PROGRESS_INTERVAL_MS (default 5000 ms) while the work
 * lasts, and a closing line only if at least one was written, so short work
 * leaves nothing in the logs. BASAL_PROGRESS=off silences both forms;
 * BASAL_PROGRESS=lines forces the line form on a terminal.
 *
 * A ticker thread writes, so that a phase that never reports (one long call)
 * still shows its elapsed time. Updates are atomic: any thread may report. */
#ifndef BS_PROGRESS_H
#define BS_PROGRESS_H

#include <stdint.h>

typedef struct bs_progress bs_progress;

/* unit: "B" for bytes (printed as kB/MB/GB), else the name of the items
 * ("requests", "items"); total 0 = unknown (no bar, no percent). what is
 * copied. Returns NULL when progress is off or out of memory; every other
 * function accepts NULL and does nothing. */
bs_progress *bs_progress_start(const char *what, uint64_t total, const char *unit);
void bs_progress_set(bs_progress *p, uint64_t done);
void bs_progress_add(bs_progress *p, uint64_t n);
/* Of done, the amount that was there before this run (a resumed download):
 * left out of the rate ("12.3 MB/s", shown for bytes) and the time left. */
void bs_progress_base(bs_progress *p, uint64_t base);
/* A new total (a phase whose size is learnt later), keeps done. */
void bs_progress_total(bs_progress *p, uint64_t total);
/* A message line on stderr while p runs: on a terminal the bar is cleared,
 * the line written, and the bar drawn again below it. p may be NULL (then it
 * is a plain fprintf). A newline is added. */
void bs_progress_printf(bs_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* BASAL_PROGRESS_INTERVAL_MS when set to 10 or more, else fallback: the
 * period of the line form, and of other progress logs (serve's long forwards). */
long bs_progress_interval_ms(long fallback);
/* A short note shown after the counts while p runs ("forward of 16862
 * tokens: layer 14 of 32"), until replaced; an empty note removes it. */
void bs_progress_note(bs_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Stops the ticker, writes the closing line (see above) and frees p. */
void bs_progress_end(bs_progress *p);

/* The line form's timestamp: 2026-12-01T12:50:01.123Z (UTC). out has room
 * for 32 bytes. */
void bs_progress_timestamp(char *out, unsigned long cap);

#endif
