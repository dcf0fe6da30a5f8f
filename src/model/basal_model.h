/* A Basal model directory (spec 05 §1, 01 §1): config.json, basal.json,
 * chat_template.jinja, tokenizer_config.json, tokenizer.json, the weights and
 * CALIBRATION.json, loaded in that order (05 §1 D2) and each checked against
 * the prompt contract this server implements. Anything else is refused at
 * load, with the file and the problem named. */
#ifndef BS_BASAL_MODEL_H
#define BS_BASAL_MODEL_H

#include "decision/decide.h"
#include "tokenizer/tokenizer.h"
#include "model/evidence.h"
#include "model/model.h"

typedef struct bs_basal_model {
    char *dir;
    char *name;            /* basal.json name: the served model name */
    char *version;         /* basal.json version, or NULL */
    int templates_object;  /* basal.json carries the basal-1.0 templates object */
    char *bos;             /* tokenizer_config.json bos_token */
    int32_t bos_id, im_start_id, im_end_id;
    bs_tokenizer *tok;
    bs_calibration calib;
    char *calib_source;    /* where calib came from: "<dir>/CALIBRATION.json", another file, "none" (the
                              model has none) or "off" (bs_basal_set_calibration) */
    int orders;            /* option orders per readout (01 §2.9): 2 = original and reversed, averaged
                              (bs_basal_load's default); 1 = the original order alone */
    bs_config cfg;
    int has_weights;
    bs_model model;        /* valid when has_weights */
    bs_evidence_head *evidence; /* evidence_head.pt (03 §4.2), or NULL when the directory has none */
} bs_basal_model;

/* Loads and checks the directory. With load_weights 0 only the headers of the
 * weights are not even opened (for `prepare`: tokenizer and manifests only). */
int bs_basal_load(bs_basal_model *b, const char *dir, bs_pool *pool, int load_weights, bs_err *e);
void bs_basal_free(bs_basal_model *b);

/* Serving knobs (upstream's --calibration / --no-calibration): replaces the
 * model's calibration with the CALIBRATION.json at file (a missing or broken
 * file is an error naming it), or with none (file NULL: temperature 1 for
 * every type, no max_error thresholds, "calibration":"unvalidated"). */
int bs_basal_set_calibration(bs_basal_model *b, const char *file, bs_err *e);

/* The individual manifest checks, for tests. */
int bs_basal_json_check(const char *text, size_t len, char **name, char **version, int *templates_object,
                        bs_err *e);
int bs_tokenizer_config_bos(const char *text, size_t len, char **bos, bs_err *e);

#endif
