"""Python bindings of basal-c's in-process API (include/basal.h), over ctypes.

usage:
    import basal
    with basal.Model("/models/basal-1.5-mini") as m:      # or "mini", "owner/name@rev"
        answer = m.decide({"model": m.name, "state": "...", "questions": {...}})

`Model.decide` returns the answer as a dict, exactly the body `basal serve`
answers on POST /v1/systemone for the same request except usage.latency_ms;
a request the endpoint refuses raises RequestError (with its HTTP status and
error body); a runtime failure raises BasalError. `Model.decide_raw` returns
(status, bytes) without raising for refusals. `Model.decide_many(requests)`
decides a list in one call (basal_decide_batch: the forwards of all of them
packed together; the same answers as one call each), `decide_raw_many` its
(status, bytes) pairs. One call at a time per Model (a lock serialises calls
from several threads).

The library is libbasal.so: $BASAL_LIB when set, else the build tree's
build/libbasal.so next to this package's repository, else the system's
(ctypes.util.find_library("basal")).
"""
import ctypes
import ctypes.util
import json
import os
import threading

__all__ = ["Model", "BasalError", "RequestError", "library_path", "library_version", "__version__"]

# The include/basal.h these structures mirror (BASAL_VERSION_MAJOR.MINOR.PATCH):
# a library of another major.minor is refused, its structures may differ.
__version__ = "0.1.0"

_ERR_MSG = 1024


class _Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * _ERR_MSG)]


class _Options(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int), ("backend", ctypes.c_char_p), ("dtype", ctypes.c_char_p),
                ("gemm_table", ctypes.c_char_p), ("no_prefix_cache", ctypes.c_int),
                ("tree_max_tokens", ctypes.c_int), ("readout_bf16", ctypes.c_int),
                ("evidence_separate", ctypes.c_int), ("orders", ctypes.c_int), ("calibration", ctypes.c_char_p),
                ("no_calibration", ctypes.c_int), ("int8_smooth_alpha", ctypes.c_double)]


class _Result(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("json", ctypes.POINTER(ctypes.c_char)), ("len", ctypes.c_size_t),
                ("plan_ms", ctypes.c_double), ("forward_ms", ctypes.c_double)]


class BasalError(Exception):
    """A failure of the library: code is the negative BS_E* code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class RequestError(BasalError):
    """The request is one /v1/systemone refuses: status and body (a dict) as the server sends them;
    index: its position in a decide_many list (None for decide)."""

    def __init__(self, status, body, index=None):
        at = "" if index is None else f"request {index}: "
        super().__init__(-1, f"{at}HTTP {status}: {json.dumps(body, ensure_ascii=False)[:300]}")
        self.status = status
        self.body = body
        self.index = index


def library_path():
    """The libbasal.so this package loads."""
    env = os.environ.get("BASAL_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.join(here, "..", "..", "..", "build", "libbasal.so")
    if os.path.exists(tree):
        return os.path.normpath(tree)
    found = ctypes.util.find_library("basal")
    if not found:
        raise BasalError(-2, "libbasal.so not found: build basal-c (make), install it, or set BASAL_LIB")
    return found


_lib = None
_lib_lock = threading.Lock()


def _load():
    global _lib
    with _lib_lock:
        if _lib is None:
            lib = ctypes.CDLL(library_path())
            lib.basal_open.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.POINTER(_Options),
                                       ctypes.POINTER(_Err)]
            lib.basal_open.restype = ctypes.c_int
            lib.basal_close.argtypes = [ctypes.c_void_p]
            lib.basal_close.restype = None
            lib.basal_model_name.argtypes = [ctypes.c_void_p]
            lib.basal_model_name.restype = ctypes.c_char_p
            lib.basal_decide.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_Result),
                                         ctypes.POINTER(_Err)]
            lib.basal_decide.restype = ctypes.c_int
            lib.basal_decide_batch.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                                               ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(_Result),
                                               ctypes.POINTER(_Err)]
            lib.basal_decide_batch.restype = ctypes.c_int
            lib.basal_result_free.argtypes = [ctypes.POINTER(_Result)]
            lib.basal_result_free.restype = None
            lib.basal_version.argtypes = []
            lib.basal_version.restype = ctypes.c_char_p
            have = lib.basal_version().decode()
            if have.split(".")[:2] != __version__.split(".")[:2]:
                raise BasalError(-5, f"{library_path()} is libbasal {have}; these bindings are for {__version__}")
            _lib = lib
        return _lib


def library_version():
    """The version of the libbasal.so loaded (basal_version())."""
    return _load().basal_version().decode()


def _opt(s):
    return s.encode() if isinstance(s, str) else s


class Model:
    """A Basal model loaded in-process (basal_open)."""

    def __init__(self, model, *, threads=0, backend=None, dtype=None, gemm_table=None, prefix_cache=True,
                 tree_max_tokens=0, readout_bf16=False, orders=2, calibration=None, int8_smooth_alpha=None):
        """orders: 2 (original and reversed option order, averaged) or 1 (the
        original order only); calibration: None (the model's CALIBRATION.json),
        a path to another one, or False (no calibration: temperature 1);
        int8_smooth_alpha (dtype "int8"): None (the default, 0.5), a value in
        (0, 1], or 0 (no smoothing)."""
        self._lib = _load()
        self._lock = threading.Lock()
        self._s = ctypes.c_void_p()
        if orders not in (1, 2):
            raise ValueError(f"orders must be 1 or 2, got {orders!r}")
        o = _Options(threads, _opt(backend), _opt(dtype), _opt(gemm_table), 0 if prefix_cache else 1,
                     tree_max_tokens, 1 if readout_bf16 else 0, 0, orders,
                     _opt(os.fspath(calibration)) if calibration else None, 1 if calibration is False else 0,
                     0.0 if int8_smooth_alpha is None else (-1.0 if int8_smooth_alpha == 0 else float(int8_smooth_alpha)))
        e = _Err()
        rc = self._lib.basal_open(ctypes.byref(self._s), os.fsencode(model), ctypes.byref(o), ctypes.byref(e))
        if rc < 0:
            self._s = None
            raise BasalError(rc, e.msg.decode("utf-8", "replace"))
        self.name = self._lib.basal_model_name(self._s).decode()

    @staticmethod
    def _body(request):
        if isinstance(request, (dict, list)):
            return json.dumps(request, ensure_ascii=False).encode()
        if isinstance(request, str):
            return request.encode()
        return bytes(request)

    def decide_raw(self, request):
        """(status, body bytes) for a request given as a dict, str or bytes."""
        if self._s is None:
            raise BasalError(-1, "the model is closed")
        data = self._body(request)
        r, e = _Result(), _Err()
        with self._lock:
            rc = self._lib.basal_decide(self._s, data, len(data), ctypes.byref(r), ctypes.byref(e))
            try:
                if rc < 0:
                    raise BasalError(rc, e.msg.decode("utf-8", "replace"))
                return r.status, ctypes.string_at(r.json, r.len)
            finally:
                self._lib.basal_result_free(ctypes.byref(r))

    def decide(self, request):
        """The answer as a dict; RequestError when the endpoint would refuse the request."""
        status, body = self.decide_raw(request)
        doc = json.loads(body)
        if status != 200:
            raise RequestError(status, doc)
        return doc

    def decide_raw_many(self, requests):
        """[(status, body bytes)] for a list of requests (dicts, str or bytes), decided in one call."""
        if self._s is None:
            raise BasalError(-1, "the model is closed")
        bodies = [self._body(r) for r in requests]
        n = len(bodies)
        reqs = (ctypes.c_char_p * max(n, 1))(*bodies)
        lens = (ctypes.c_size_t * max(n, 1))(*[len(b) for b in bodies])
        res, e = (_Result * max(n, 1))(), _Err()
        with self._lock:
            rc = self._lib.basal_decide_batch(self._s, n, reqs, lens, res, ctypes.byref(e))
            try:
                if rc < 0:
                    raise BasalError(rc, e.msg.decode("utf-8", "replace"))
                return [(res[i].status, ctypes.string_at(res[i].json, res[i].len)) for i in range(n)]
            finally:
                for i in range(n):
                    self._lib.basal_result_free(ctypes.byref(res[i]))

    def decide_many(self, requests):
        """The answers (dicts) of a list of requests decided in one call; RequestError (with .index) for the
        first one the endpoint would refuse."""
        out = []
        for i, (status, body) in enumerate(self.decide_raw_many(requests)):
            doc = json.loads(body)
            if status != 200:
                raise RequestError(status, doc, i)
            out.append(doc)
        return out

    def close(self):
        if self._s is not None:
            self._lib.basal_close(self._s)
            self._s = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
