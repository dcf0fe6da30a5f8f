#!/usr/bin/env python3
"""Writes web/openapi.json, the API description served at GET /openapi.json
(built into the binary), from TypeSafe's OpenAPI document (spec 02 TS-openapi,
shared/spec/typesafe-openapi.json) and the rules of spec 02/03.

TypeSafe's component schemas are kept as they are, with only these changes,
each an extension this server accepts or returns (spec 03):
  - Question and Answer gain the members multi and act (oneOf and mapping);
  - properties are added, never removed or changed: option_keys, evidence and
    levels on questions, facts on the request, evidence on answers, questions,
    branches and latency_ms in Usage, mode, early_exit and dtype in ModelMetadata;
  - the criteria of ChoiceQuestion and ScoreQuestion become anyOf [TypeSafe's
    schema, the other form the extension allows] (array keys for choice, an
    object of named levels for score).
tests/server/playground_test.py checks exactly that against the original.

Usage: tools/make-openapi.py [--check]   (SHARED: the shared/ folder, default ../shared)
"""
import argparse
import copy
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("SHARED", os.path.join(ROOT, "..", "shared"))
OUT = os.path.join(ROOT, "web", "openapi.json")
VERSION_H = os.path.join(ROOT, "include", "basal.h")

ANY_TEXT = [{"type": "string"}, {"additionalProperties": True, "type": "object"}, {"items": {}, "type": "array"}]


def ref(name):
    return {"$ref": f"#/components/schemas/{name}"}


def json_body(schema, description):
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def version():
    with open(VERSION_H) as f:
        for line in f:
            if line.startswith("#define BASAL_VERSION"):
                return line.split('"')[1]
    raise SystemExit("BASAL_VERSION not found in include/basal.h")


def build():
    with open(os.path.join(SHARED, "spec", "typesafe-openapi.json")) as f:
        ts = json.load(f)
    s = copy.deepcopy(ts["components"]["schemas"])

    option_keys = {"description": "Extension: `hide` shows the options to the model by letter only (spec 01 §2.8).",
                   "anyOf": [{"enum": ["show", "hide"]}, {"type": "null"}], "default": "show", "title": "Option Keys"}
    evidence = {"description": "Extension (spec 03 §4): a truthy value asks for verbatim spans of the state that "
                               "support the answer (models with an evidence head).", "title": "Evidence"}
    evidence_out = {"description": "Extension (spec 03 §4.6): present when the question asked for evidence.",
                    "items": ref("EvidenceSpan"), "type": "array", "title": "Evidence"}
    probs = {"additionalProperties": {"type": "number"}, "type": "object"}

    for q in ("ChoiceQuestion", "NoulQuestion", "ScoreQuestion"):
        s[q]["properties"]["option_keys"] = option_keys
        s[q]["properties"]["evidence"] = evidence
    for a in ("ChoiceAnswer", "NoulAnswer", "ScoreAnswer"):
        s[a]["properties"]["evidence"] = evidence_out

    ts_choice = s["ChoiceQuestion"]["properties"]["criteria"]
    s["ChoiceQuestion"]["properties"]["criteria"] = {
        "title": "Criteria",
        "description": "TypeSafe's object form, or (extension) an array of option keys without descriptions. "
                       "1 to 255 options; 11 to 255 use the group strategy of spec 03 §5.",
        "anyOf": [ts_choice, {"items": {"type": "string"}, "type": "array"}]}
    ts_score = s["ScoreQuestion"]["properties"]["criteria"]
    s["ScoreQuestion"]["properties"]["criteria"] = {
        "title": "Criteria",
        "description": "TypeSafe's ordered levels, or (extension) an object of named levels {name: description}. "
                       "1 to 10 levels.",
        "anyOf": [ts_score, {"additionalProperties": True, "type": "object", "minProperties": 1}]}
    s["ScoreQuestion"]["properties"]["levels"] = {
        "title": "Levels", "description": "Extension: used as the criteria when `criteria` is absent or null.",
        "anyOf": [ts_score, {"additionalProperties": True, "type": "object"}, {"type": "null"}]}

    s["SystemOneRequest"]["properties"]["facts"] = {
        "title": "Facts", "description": "Extension (spec 03 §3): `auto` appends computed calendar and money facts "
                                         "to a Polish state.",
        "anyOf": [{"enum": ["off", "auto"]}, {"type": "null"}], "default": "off"}
    s["Usage"]["properties"].update({
        "questions": {"type": "integer", "title": "Questions", "description": "Number of questions in the request."},
        "branches": {"type": "integer", "title": "Branches",
                     "description": "Readouts computed: one per question, one per multi label, none for "
                                    "single-option questions."},
        "latency_ms": {"type": "number", "title": "Latency Ms",
                       "description": "Milliseconds from the request's arrival to its response, 2 decimals."},
    })
    s["ModelMetadata"]["properties"].update({
        "mode": {"type": "string", "title": "Mode", "description": "The serving engine: `basal-c`."},
        "early_exit": {"type": "array", "items": {}, "title": "Early Exit", "description": "Always empty."},
        "dtype": {"type": "string", "enum": ["bf16"], "title": "Dtype",
                  "description": "Present only when the model is served in the opt-in `bf16` compute mode "
                                 "(`--dtype bf16`): matrix-product inputs rounded to bf16."},
    })

    instructions = copy.deepcopy(s["ChoiceQuestion"]["properties"]["instructions"])
    instructions.pop("examples", None)
    instructions["description"] = "The question text."
    s["MultiQuestion"] = {
        "title": "MultiQuestion", "type": "object", "required": ["type", "criteria"],
        "description": "Extension (spec 03 §1): several yes/no labels, answered with the set that applies.",
        "properties": {
            "type": {"const": "multi", "type": "string", "title": "Type"},
            "instructions": instructions,
            "criteria": {"title": "Criteria", "description": "Labels: {key: description} or an array of keys.",
                         "anyOf": [{"additionalProperties": True, "type": "object", "minProperties": 1},
                                   {"items": {"type": "string"}, "type": "array", "minItems": 1}]},
            "threshold": {"type": "number", "default": 0.5, "title": "Threshold"},
            "max": {"type": "number", "title": "Max", "description": "At most this many labels (truncated)."},
            "min": {"type": "number", "title": "Min", "description": "At least this many labels (truncated)."},
            "option_keys": option_keys,
        }}
    s["ActQuestion"] = {
        "title": "ActQuestion", "type": "object", "required": ["type", "costs"],
        "description": "Extension (spec 03 §2): a yes/no or choice readout, then the action of minimum expected "
                       "cost; with max_error, refuses to act automatically below the certified confidence.",
        "properties": {
            "type": {"const": "act", "type": "string", "title": "Type"},
            "instructions": instructions,
            "criteria": {"title": "Criteria", "description": "Outcomes: {true, false} descriptions for a yes/no "
                                                            "readout, else the options of a choice.",
                         "anyOf": [{"additionalProperties": True, "type": "object"},
                                   {"items": {"type": "string"}, "type": "array"}, {"type": "null"}]},
            "base": {"enum": ["noul", "choice", "score"], "type": "string", "title": "Base"},
            "costs": {"title": "Costs", "type": "object", "minProperties": 1,
                      "description": "Full form {action: {outcome: cost}} or short form {\"wrong\": n, \"defer\": n}.",
                      "additionalProperties": {"anyOf": [{"type": "number"}, probs]}},
            "defer_action": {"type": "string", "minLength": 1, "title": "Defer Action"},
            "max_error": {"type": "number", "title": "Max Error"},
            "option_keys": option_keys,
            "evidence": evidence,
        }}
    s["MultiAnswer"] = {
        "title": "MultiAnswer", "type": "object",
        "required": ["type", "selected", "probabilities", "threshold", "set_confidence"],
        "description": "Extension: the labels that apply (by probability, descending) and each label's P(yes).",
        "properties": {
            "type": {"const": "multi", "type": "string", "title": "Type"},
            "selected": {"items": {"type": "string"}, "type": "array", "title": "Selected"},
            "probabilities": dict(probs, title="Probabilities",
                                  description="P(yes) of each label, in label order (they need not sum to 1)."),
            "threshold": {"type": "number", "title": "Threshold"},
            "set_confidence": {"type": "number", "title": "Set Confidence",
                               "description": "Probability of exactly the selected set."},
        }}
    s["ActAnswer"] = {
        "title": "ActAnswer", "type": "object",
        "required": ["type", "action", "expected_costs", "answer", "probabilities", "confidence", "calibration"],
        "description": "Extension: the chosen action, the expected cost of each action and the readout.",
        "properties": {
            "type": {"const": "act", "type": "string", "title": "Type"},
            "action": {"type": "string", "title": "Action"},
            "expected_costs": dict(probs, title="Expected Costs", description="Rounded to 6 decimals."),
            "answer": {"type": "string", "title": "Answer", "description": "The most probable outcome."},
            "probabilities": dict(probs, title="Probabilities"),
            "confidence": {"type": "number", "title": "Confidence", "description": "max(p)."},
            "max_error": {"type": "string", "title": "Max Error",
                          "description": "`no certified threshold for this target` when max_error has none."},
            "refused": {"type": "string", "title": "Refused",
                        "description": "The action the costs chose, replaced by the defer action."},
            "calibration": {"enum": ["validated", "unvalidated"], "type": "string", "title": "Calibration"},
            "evidence": evidence_out,
        }}
    s["EvidenceSpan"] = {
        "title": "EvidenceSpan", "type": "object", "required": ["text", "start", "end", "probability"],
        "description": "A verbatim span of the state: state[start:end] == text (character offsets).",
        "properties": {"text": {"type": "string"}, "start": {"type": "integer", "minimum": 0},
                       "end": {"type": "integer", "minimum": 0}, "probability": {"type": "number"}}}

    for union, members in (("Question", ("MultiQuestion", "ActQuestion")), ("Answer", ("MultiAnswer", "ActAnswer"))):
        for m in members:
            s[union]["oneOf"].append(ref(m))
            s[union]["discriminator"]["mapping"][s[m]["properties"]["type"]["const"]] = f"#/components/schemas/{m}"

    # errors of /v1/systemone besides TypeSafe's 422 (spec 02 §2, §3, §4.4, §4.5, §6, §10)
    s["ErrorDetail"] = {"title": "ErrorDetail", "type": "object", "required": ["error_type", "message"],
                        "properties": {"error_type": {"type": "string", "examples": ["api_usage_error"]},
                                       "message": {"type": "string"}}}
    s["ApiError"] = {
        "title": "ApiError", "type": "object", "required": ["detail"],
        "description": "400 usage errors, 401/403 authentication, 413 body too large, 529 overloaded.",
        "properties": {"detail": {"anyOf": [{"type": "string"}, ref("ErrorDetail")]}},
        "examples": [{"detail": {"error_type": "api_usage_error", "message": "Unknown model: nope-1"}},
                     {"detail": "Choice question must have at least one choice: q"}]}
    s["UnsupportedError"] = {
        "title": "UnsupportedError", "type": "object", "required": ["error", "detail"],
        "description": "422: questions this model cannot answer (capabilities, evidence, prompt too long).",
        "properties": {"error": {"const": "unsupported", "type": "string"},
                       "detail": {"type": "array", "items": {
                           "type": "object", "required": ["type", "loc", "msg"],
                           "properties": {"type": {"type": "string"}, "msg": {"type": "string"},
                                          "loc": {"type": "array",
                                                  "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}}}}}
    s["InternalError"] = {"title": "InternalError", "type": "object", "required": ["error", "detail"],
                          "properties": {"error": {"const": "internal", "type": "string"},
                                         "detail": {"type": "string"}},
                          "examples": [{"error": "internal", "detail": "engine stopped"}]}
    s["NotFound"] = {"title": "NotFound", "type": "object", "required": ["detail"],
                     "properties": {"detail": {"type": "string"}}, "examples": [{"detail": "Not Found"}]}

    # the upstream dialect (spec 02 §5)
    s["BasalRequest"] = {
        "title": "BasalRequest", "type": "object", "required": ["state", "questions"],
        "description": "Upstream basal-serve v1.5.0 request: lenient (a question without a known type is a choice).",
        "properties": {
            "model": {"type": "string", "title": "Model", "description": "Optional: routes to a served model."},
            "state": {"title": "State", "description": "Any JSON except null.", "not": {"type": "null"}},
            "questions": {"title": "Questions", "type": "object", "minProperties": 1,
                          "additionalProperties": ref("BasalQuestion")},
            "facts": s["SystemOneRequest"]["properties"]["facts"],
        }}
    s["BasalQuestion"] = {
        "title": "BasalQuestion", "type": "object",
        "description": "type: choice (also when absent or unknown), noul, score, multi, act; 2 to 10 options "
                       "except multi. The other fields as on /v1/systemone.",
        "properties": {"type": {"type": "string"}, "instructions": {}, "criteria": {}, "levels": {},
                       "option_keys": {"enum": ["show", "hide"]}, "evidence": {}}}
    s["BasalNoulAnswer"] = {
        "title": "BasalNoulAnswer", "type": "object", "required": ["type", "noul", "probabilities", "confidence"],
        "properties": {"type": {"const": "noul", "type": "string"}, "noul": {"type": "number"},
                       "probabilities": {"type": "object", "required": ["true", "false"],
                                         "properties": {"true": {"type": "number"}, "false": {"type": "number"}}},
                       "confidence": {"type": "number", "description": "max(p)."}, "evidence": evidence_out}}
    s["BasalChoiceAnswer"] = {
        "title": "BasalChoiceAnswer", "type": "object", "required": ["type", "choice", "probabilities", "confidence"],
        "properties": {"type": {"const": "choice", "type": "string"}, "choice": {"type": "string"},
                       "probabilities": probs, "confidence": {"type": "number", "description": "max(p)."},
                       "evidence": evidence_out}}
    s["BasalScoreAnswer"] = {
        "title": "BasalScoreAnswer", "type": "object",
        "required": ["type", "score", "legend", "probabilities", "confidence"],
        "properties": {"type": {"const": "score", "type": "string"}, "score": {"type": "number"},
                       "legend": {"type": "object", "additionalProperties": {"type": "string"}},
                       "probabilities": probs, "confidence": {"type": "number", "description": "max(p)."},
                       "evidence": evidence_out}}
    basal_members = ["BasalNoulAnswer", "BasalChoiceAnswer", "BasalScoreAnswer", "MultiAnswer", "ActAnswer"]
    s["BasalAnswer"] = {
        "title": "BasalAnswer", "oneOf": [ref(m) for m in basal_members],
        "discriminator": {"propertyName": "type", "mapping": {
            t: f"#/components/schemas/{m}" for t, m in zip(("noul", "choice", "score", "multi", "act"), basal_members)}}}
    s["BasalResponse"] = {
        "title": "BasalResponse", "type": "object", "required": ["model", "answers", "usage"],
        "properties": {"model": {"type": "string"},
                       "answers": {"type": "object", "additionalProperties": ref("BasalAnswer")},
                       "usage": ref("Usage")}}
    s["BasalError"] = {"title": "BasalError", "type": "object", "required": ["error"],
                       "description": "Every /v1/basal failure: 422 (validation, unknown model, capability), 401, "
                                      "403, 413, 529; 500 adds detail.",
                       "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
                       "examples": [{"error": "Expecting value: line 1 column 1 (char 0)"}]}
    s["Health"] = {"title": "Health", "type": "object", "required": ["status"],
                   "description": "200 when every model is loaded and requests are answered.",
                   "properties": {"status": {"type": "string", "examples": ["ok"]},
                                  "models": {"type": "array", "items": {"type": "string"}},
                                  "default_model": {"type": "string"}}}

    # the playground's logit lens (issue 33; README "Logit lens")
    num_or_null = {"anyOf": [{"type": "number"}, {"type": "null"}]}
    layer_rows = {"type": "array", "description": "One row per layer, first to last; a row is null where a logit "
                                                  "was not finite.",
                  "items": {"anyOf": [{"type": "array", "items": {"type": "number"}}, {"type": "null"}]}}
    s["LensPart"] = {
        "title": "LensPart", "type": "object", "required": ["part", "text", "tokens"],
        "description": "A piece of the prompt: the fixed template or the substituted state, question or option "
                       "block; tokens counts the prompt's tokens that start in it.",
        "properties": {"part": {"enum": ["template", "state", "question", "options"], "type": "string"},
                       "text": {"type": "string"}, "tokens": {"type": "integer", "minimum": 0}}}
    s["LensOrder"] = {
        "title": "LensOrder", "type": "object",
        "required": ["order", "tokens", "letters", "options", "letter_ids", "parts", "logits", "probabilities"],
        "properties": {
            "order": {"type": "integer", "enum": [0, 1], "description": "0 = original, 1 = reversed option order."},
            "tokens": {"type": "integer", "description": "Tokens of the prompt."},
            "letters": {"type": "array", "items": {"type": "string"}},
            "options": {"type": "array", "items": {"type": "string"}, "description": "The key shown at each letter."},
            "letter_ids": {"type": "array", "items": {"type": "integer"}},
            "parts": {"type": "array", "items": ref("LensPart")},
            "logits": {"type": "array", "description": "Letter logits after each layer (by letter).",
                       "items": {"type": "array", "items": num_or_null}},
            "probabilities": dict(layer_rows, description="Softmax of the letter logits after each layer (by "
                                                          "letter); the last row is the served order's "
                                                          "distribution bit for bit.")}}
    s["LensReadout"] = {
        "title": "LensReadout", "type": "object", "required": ["kind", "keys", "orders", "mean"],
        "description": "One readout of a question: the question itself, a multi label, or a large choice's round-1 "
                       "group or its finalists (spec 03 §5).",
        "properties": {
            "kind": {"enum": ["question", "label", "group", "final"], "type": "string"},
            "label": {"type": "string", "description": "kind label: the label key."},
            "group": {"type": "integer", "description": "kind group: its index."},
            "keys": {"type": "array", "items": {"type": "string"}},
            "orders": {"type": "array", "minItems": 1, "maxItems": 2, "items": ref("LensOrder")},
            "mean": dict(layer_rows, description="The order average after each layer, by key (uncalibrated)."),
            "temperature": {"type": "number"},
            "calibrated": {"type": "array", "items": {"type": "number"},
                           "description": "The served distribution (not for group and final)."}}}
    s["LensQuestion"] = {
        "title": "LensQuestion", "type": "object", "required": ["id", "type", "lang", "readouts"],
        "properties": {"id": {"type": "string"}, "type": {"type": "string"}, "lang": {"enum": ["pl", "en"]},
                       "readouts": {"type": "array", "items": ref("LensReadout")}}}
    s["LensDocument"] = {
        "title": "LensDocument", "type": "object",
        "required": ["model", "dtype", "layers", "orders", "questions", "answer"],
        "description": "The logit lens of one request: after every layer, the final RMSNorm and the option "
                       "letters' rows of the output head applied to the hidden state at each prompt's readout.",
        "properties": {"model": {"type": "string"}, "dtype": {"enum": ["f32", "bf16", "int8w"], "type": "string"},
                       "layers": {"type": "integer", "minimum": 1}, "orders": {"enum": [1, 2], "type": "integer"},
                       "questions": {"type": "array", "items": ref("LensQuestion")},
                       "answer": dict(ref("SystemOneResponse"),
                                      description="What POST /v1/systemone answers for the same request.")}}

    timing = {
        "x-basal-queue-ms": {"description": "Milliseconds from arrival to the start of the batch's admission "
                                            "(planning and waiting), 3 decimals.", "schema": {"type": "string"}},
        "x-basal-compute-ms": {"description": "Milliseconds of the batch's computation, 3 decimals.",
                               "schema": {"type": "string"}},
        "x-basal-batch-requests": {"description": "Requests in that batch.", "schema": {"type": "integer"}},
        "x-typesafe-request-id": {"description": "32 lowercase hex digits, unique per request.",
                                  "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}},
    }
    request_id = {"x-typesafe-request-id": timing["x-typesafe-request-id"]}
    retry = dict(request_id, **{"Retry-After": {"description": "Seconds: 1.", "schema": {"type": "integer"}}})
    auth = {"401": json_body(ref("ApiError"), "Wrong API key (header WWW-Authenticate: Bearer)."),
            "403": json_body(ref("ApiError"), "API key required: missing, empty or not a Bearer token.")}

    paths = copy.deepcopy(ts["paths"])
    so = paths["/v1/systemone"]["post"]
    so["tags"] = ["System One"]
    so["responses"]["200"]["headers"] = timing
    so["responses"]["422"]["content"]["application/json"]["schema"] = {
        "anyOf": [ref("HTTPValidationError"), ref("UnsupportedError")]}
    so["responses"]["422"]["description"] = "Validation Error, or questions this model cannot answer."
    so["responses"].update({
        "400": json_body(ref("ApiError"), "Usage error: unknown model or question type, option counts."),
        **auth,
        "413": json_body(ref("ApiError"), "Body larger than max_body_bytes."),
        "500": json_body(ref("InternalError"), "The computation failed."),
        "529": dict(json_body(ref("ApiError"), "Too many requests in flight; retry after a short delay."),
                    headers=retry),
    })
    models = paths["/v1/models"]["get"]
    models["tags"] = ["System One"]
    models["responses"].update(auth)
    head = copy.deepcopy(models)
    head["operationId"] = "models_v1_v1_models_head"
    head["summary"] = "Models V1 (headers only)"
    head["responses"] = {"200": {"description": "As GET, without a body."},
                         "401": {"description": "Wrong API key."}, "403": {"description": "API key required."}}
    paths["/v1/models"]["head"] = head
    paths["/v1/basal"] = {"post": {
        "tags": ["basal"], "summary": "Basal", "operationId": "basal_v1_basal_post",
        "description": "The upstream basal-serve v1.5.0 dialect of the same decisions: lenient parsing, "
                       "`confidence = max(p)` and `probabilities` for every type, every error a 422 "
                       "`{\"error\": …}`.",
        "requestBody": {"required": True, "content": {"application/json": {"schema": ref("BasalRequest")}}},
        "security": [{"HTTPBearer": []}],
        "responses": {
            "200": dict(json_body(ref("BasalResponse"), "Successful Response"), headers=timing),
            "401": json_body(ref("BasalError"), "Wrong API key."),
            "403": json_body(ref("BasalError"), "API key required."),
            "413": json_body(ref("BasalError"), "Body larger than max_body_bytes."),
            "422": json_body(ref("BasalError"), "Invalid JSON or request, unknown model, unsupported question."),
            "500": json_body(ref("InternalError"), "The computation failed."),
            "529": dict(json_body(ref("BasalError"), "Too many requests in flight."), headers=retry),
        }}}
    paths["/v1/lens"] = {"post": {
        "tags": ["operations"], "summary": "Logit lens", "operationId": "lens_v1_lens_post",
        "description": "The playground's logit lens: a /v1/systemone request decided as usual, answered with every "
                       "question's letter distribution of every option order after every layer. CPU backend only "
                       "(else 422 unsupported lens_unavailable); off with the playground (--no-ui, YAML ui: false).",
        "requestBody": copy.deepcopy(so["requestBody"]),
        "security": copy.deepcopy(so.get("security", [{"HTTPBearer": []}])),
        "responses": {
            "200": dict(json_body(ref("LensDocument"), "The lens document."), headers=timing),
            "400": json_body(ref("ApiError"), "Usage error, as on /v1/systemone."),
            **auth,
            "404": json_body(ref("NotFound"), "The playground is off."),
            "413": json_body(ref("ApiError"), "Body larger than max_body_bytes."),
            "422": json_body({"anyOf": [ref("HTTPValidationError"), ref("UnsupportedError")]},
                             "Validation error, or questions this model cannot answer (also: the lens needs the "
                             "CPU backend)."),
            "500": json_body(ref("InternalError"), "The computation failed."),
            "529": dict(json_body(ref("ApiError"), "Too many requests in flight."), headers=retry),
        }}}
    paths["/health"] = {"get": {
        "tags": ["operations"], "summary": "Health", "operationId": "health_get",
        "description": "Readiness, never authenticated. 200 once the models are loaded.",
        "responses": {"200": json_body(ref("Health"), "Ready."),
                      "503": json_body(ref("Health"), "Not ready yet (models loading).")}}}
    paths["/metrics"] = {"get": {
        "tags": ["operations"], "summary": "Metrics", "operationId": "metrics_get",
        "description": "Prometheus text exposition 0.0.4, only with --metrics (YAML metrics: true).",
        "responses": {"200": {"description": "The metrics.",
                              "content": {"text/plain; version=0.0.4": {"schema": {"type": "string"}}}},
                      "404": json_body(ref("NotFound"), "Metrics are off.")}}}
    paths["/openapi.json"] = {"get": {
        "tags": ["operations"], "summary": "OpenAPI", "operationId": "openapi_get",
        "description": "This document.",
        "responses": {"200": json_body({"type": "object"}, "The OpenAPI 3.1 description of this server.")}}}
    paths["/"] = {"get": {
        "tags": ["operations"], "summary": "Playground", "operationId": "playground_get",
        "description": "A self-contained HTML page to try the API in a browser (off with --no-ui, YAML ui: false).",
        "responses": {"200": {"description": "The page.", "content": {"text/html": {"schema": {"type": "string"}}}},
                      "404": json_body(ref("NotFound"), "The playground is off.")}}}

    return {
        "openapi": ts["openapi"],
        "info": {
            "title": "basal-c",
            "version": version(),
            "summary": "Typed decisions (choice, noul, score, multi, act) from Basal models.",
            "description": "Two dialects of one decision service: `POST /v1/systemone` is the TypeSafe System One "
                           f"API (TypeSafe's schemas, OpenAPI {ts['info']['version']}, plus the basal-1.5 "
                           "extensions multi, act, facts and evidence) and `POST /v1/basal` is the upstream "
                           "basal-serve v1.5.0 dialect. Authentication is off unless the server names an API key "
                           "variable (`--api-key-env`); then send `Authorization: Bearer <key>`.",
        },
        "tags": [{"name": "System One", "description": "The TypeSafe System One API."},
                 {"name": "basal", "description": "The upstream basal-serve dialect."},
                 {"name": "operations", "description": "Health, metrics, this document and the playground."}],
        "paths": paths,
        "components": {"schemas": dict(sorted(s.items())),
                       "securitySchemes": ts["components"]["securitySchemes"]},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="environment: SHARED, the shared/ folder with spec/typesafe-openapi.json "
                                        "(default: ../shared next to the repository)")
    ap.add_argument("--check", action="store_true",
                    help="compare with web/openapi.json, write nothing (default off: rewrite it)")
    a = ap.parse_args()
    text = json.dumps(build(), indent=1, ensure_ascii=False) + "\n"
    if a.check:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{OUT} differs from tools/make-openapi.py: run it and commit the result")
                return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
