/* deepinfer.i - SWIG interface of the low-level module deepinfer._native (the C ABI, deepinfer.h).
 *
 * Python sees the functions of deepinfer.h under their own names, made Pythonic by typemaps:
 *   - handles are plain ints (the ABI's handles are validated 64-bit ids, never addresses, so a stale
 *     or wrong handle is an error from the library, never a crash); None passes NULL;
 *   - `T **out` handles and scalar out-parameters are returned (several as a list, in order);
 *   - (pointer, length) inputs take str (encoded as UTF-8) or bytes, and sequences of ints/floats;
 *   - a returned di_error raises the exception that deepinfer.errors makes for its code and message;
 *   - borrowed views become str / lists, copied while the event is alive;
 *   - (buf, cap, *out_len) outputs are read by helpers that retry with the size the library reports.
 * Built with -threads: the GIL is released around every call that can block, wait for a callback
 * or call one (engine create/free, polls, session free, tokenizing, grammar compiles); the O(1)
 * accessors marked %nothread below keep it, as releasing it there only costs time.
 * The deepinfer package is the API; this module is its implementation detail. */
%module(docstring="Low-level bindings of deepinfer.h (SWIG). Use the deepinfer package instead.") native

%{
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "deepinfer.h"

/* Made by deepinfer.errors at import: (code, message) -> exception instance. */
static PyObject *di_py_error_factory = NULL;
/* Progress callables by configuration handle (see di_engine_config_set_progress_callback). */
static PyObject *di_py_progress_refs = NULL;

/* Raises err as a Python exception and frees it. An exception already pending (raised by a
 * callback during the call, e.g. KeyboardInterrupt in the load progress callback) wins. */
static void di_py_raise(di_error *err) {
  if (PyErr_Occurred()) {
    di_error_free(err);
    return;
  }
  const di_code code = di_error_code(err);
  PyObject *message = PyUnicode_DecodeUTF8(di_error_message(err), (Py_ssize_t)strlen(di_error_message(err)), "replace");
  di_error_free(err);
  if (!message) return;
  if (!di_py_error_factory) {
    PyErr_Format(PyExc_RuntimeError, "deepinfer error %d: %U", (int)code, message);
    Py_DECREF(message);
    return;
  }
  PyObject *exc = PyObject_CallFunction(di_py_error_factory, "iO", (int)code, message);
  Py_DECREF(message);
  if (!exc) return;
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
}

/* An error as an exception instance (not raised), for di_event_error; Py_None for NULL. */
static PyObject *di_py_error_object(di_error *err) {
  if (!err) Py_RETURN_NONE;
  const di_code code = di_error_code(err);
  PyObject *message = PyUnicode_DecodeUTF8(di_error_message(err), (Py_ssize_t)strlen(di_error_message(err)), "replace");
  di_error_free(err);
  if (!message) return NULL;
  PyObject *exc = di_py_error_factory ? PyObject_CallFunction(di_py_error_factory, "iO", (int)code, message)
                                      : Py_BuildValue("(iO)", (int)code, message);
  Py_DECREF(message);
  return exc;
}

static void *di_py_handle(PyObject *obj) {
  if (obj == Py_None) return NULL;
  if (!PyLong_Check(obj)) {
    PyErr_SetString(PyExc_TypeError, "a deepinfer handle must be an int or None");
    return NULL;
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(obj);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  return (void *)(uintptr_t)v;
}

/* Text input: str (UTF-8) or bytes; the pointer lives as long as the argument object. */
static int di_py_text(PyObject *obj, const char **data, size_t *len) {
  Py_ssize_t n = 0;
  if (PyUnicode_Check(obj)) {
    *data = PyUnicode_AsUTF8AndSize(obj, &n);
    if (!*data) return 0;
  } else if (PyBytes_Check(obj)) {
    char *p = NULL;
    if (PyBytes_AsStringAndSize(obj, &p, &n) < 0) return 0;
    *data = p;
  } else {
    PyErr_SetString(PyExc_TypeError, "expected str or bytes");
    return 0;
  }
  *len = (size_t)n;
  return 1;
}

/* A sequence of ints as a malloc'ed int32 array (NULL when empty). */
static int di_py_ids(PyObject *obj, int32_t **data, size_t *len) {
  PyObject *seq = PySequence_Fast(obj, "expected a sequence of token ids");
  if (!seq) return 0;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  *data = NULL;
  *len = (size_t)n;
  if (n > 0) {
    *data = (int32_t *)malloc(sizeof(int32_t) * (size_t)n);
    if (!*data) {
      Py_DECREF(seq);
      PyErr_NoMemory();
      return 0;
    }
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
    if (v == -1 && PyErr_Occurred()) break;
    if (v < INT32_MIN || v > INT32_MAX) {
      PyErr_Format(PyExc_OverflowError, "token id %ld does not fit in 32 bits", v);
      break;
    }
    (*data)[i] = (int32_t)v;
  }
  Py_DECREF(seq);
  if (PyErr_Occurred()) {
    free(*data);
    *data = NULL;
    return 0;
  }
  return 1;
}

static PyObject *di_py_int_list(const int32_t *data, size_t n) {
  PyObject *list = PyList_New((Py_ssize_t)n);
  if (!list) return NULL;
  for (size_t i = 0; i < n; ++i) {
    PyObject *v = PyLong_FromLong(data[i]);
    if (!v) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, v);
  }
  return list;
}

/* Load progress: calls the Python callable with (done, total). The callback runs on the thread
 * that called di_engine_create, whose GIL the call released. An exception from the callable, or a
 * signal such as Ctrl-C, aborts the load and stays pending, so di_engine_create raises it. */
static int32_t di_py_progress(void *user, uint64_t done, uint64_t total) {
  PyGILState_STATE gil = PyGILState_Ensure();
  int32_t abort_load = 0;
  if (PyErr_Occurred() || PyErr_CheckSignals() < 0) {
    abort_load = 1;
  } else {
    PyObject *r = PyObject_CallFunction((PyObject *)user, "KK", (unsigned long long)done, (unsigned long long)total);
    if (r) Py_DECREF(r);
    else abort_load = 1;
  }
  PyGILState_Release(gil);
  return abort_load;
}

/* Growable output buffers for the (buf, cap, *out_len) calls. */
typedef struct { int32_t *data; size_t cap, len; } di_py_i32;
typedef struct { char *data; size_t cap, len; } di_py_chars;
typedef struct { uint32_t *data; size_t cap, len; } di_py_u32;
typedef struct { int32_t *ids; float *bias; size_t cap, len; } di_py_bias;

static int di_py_grow(void **data, size_t elem, size_t need, size_t *cap) {
  void *p = realloc(*data, elem * (need ? need : 1));
  if (!p) return 0;
  *data = p;
  *cap = need;
  return 1;
}

/* Runs CALL (which writes OUT->data, OUT->cap, &OUT->len) until its buffer is large enough: the
 * size needed can grow between calls (a session's context at the end of a generation). */
#define DI_PY_DANCE(OUT, CALL)                                                           \
  if (!(OUT)->data) /* most outputs fit: one call instead of asking for the size first */ \
    di_py_grow((void **)&(OUT)->data, sizeof(*(OUT)->data), 256, &(OUT)->cap);          \
  for (;;) {                                                                             \
    di_error *err_ = (CALL);                                                             \
    if (!err_ || di_error_code(err_) != DI_ERR_BUFFER_TOO_SMALL) return err_;            \
    /* Out of memory here: the library's error stands. */                                \
    if (!di_py_grow((void **)&(OUT)->data, sizeof(*(OUT)->data), (OUT)->len, &(OUT)->cap)) \
      return err_;                                                                       \
    di_error_free(err_);                                                                 \
  }
%}

%include <stdint.i>

/* deepinfer.h refuses to be read where UINTPTR_MAX is not 64-bit; SWIG's preprocessor lacks it. */
%ignore UINTPTR_MAX;
#define UINTPTR_MAX 0xFFFFFFFFFFFFFFFF

/* ---- errors --------------------------------------------------------------------------------- */

%typemap(out) di_error * {
  if ($1) {
    di_py_raise($1);
    SWIG_fail;
  }
  if (PyErr_Occurred()) SWIG_fail; /* raised by a helper or a callback */
  $result = SWIG_Py_Void();
}
%typemap(in, numinputs=0) di_error **out (di_error *tmp = NULL) { $1 = &tmp; }
%typemap(argout) di_error **out {
  PyObject *o = di_py_error_object(*$1);
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}
/* Errors never reach Python as handles: the typemaps above turn them into exceptions. */
%ignore di_error_code;
%ignore di_error_message;
%ignore di_error_free;

/* ---- handles -------------------------------------------------------------------------------- */

%define DI_HANDLE(T)
%typemap(in) T *, const T * {
  $1 = ($1_ltype)di_py_handle($input);
  if (PyErr_Occurred()) SWIG_fail;
}
%typemap(in, numinputs=0) T **out (T *tmp = NULL) { $1 = &tmp; }
%typemap(argout) T **out {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)*$1));
}
%enddef
DI_HANDLE(di_engine_config)
DI_HANDLE(di_engine)
DI_HANDLE(di_stats)
DI_HANDLE(di_sampling)
DI_HANDLE(di_session)
DI_HANDLE(di_queue)
DI_HANDLE(di_event)
DI_HANDLE(di_grammar)
DI_HANDLE(di_tokenizer)
DI_HANDLE(di_matcher)

/* ---- scalar outputs ------------------------------------------------------------------------- */

%define DI_OUTPUT(CTYPE, NAMES, TO_PY)
%typemap(in, numinputs=0) CTYPE *NAMES (CTYPE tmp = 0) { $1 = &tmp; }
%typemap(argout) CTYPE *NAMES { $result = SWIG_Python_AppendOutput($result, TO_PY(*$1)); }
%enddef
DI_OUTPUT(int32_t, out, PyLong_FromLong)
DI_OUTPUT(int32_t, has_seed, PyLong_FromLong)
DI_OUTPUT(int64_t, out, PyLong_FromLongLong)
DI_OUTPUT(uint64_t, out, PyLong_FromUnsignedLongLong)
DI_OUTPUT(uint64_t, seed, PyLong_FromUnsignedLongLong)
DI_OUTPUT(uint64_t, tag, PyLong_FromUnsignedLongLong)
DI_OUTPUT(uint64_t, prompt_tokens, PyLong_FromUnsignedLongLong)
DI_OUTPUT(uint64_t, completion_tokens, PyLong_FromUnsignedLongLong)
DI_OUTPUT(uint64_t, cached_tokens, PyLong_FromUnsignedLongLong)
DI_OUTPUT(size_t, out, PyLong_FromSize_t)
DI_OUTPUT(float, out, PyFloat_FromDouble)

/* ---- (pointer, length) inputs --------------------------------------------------------------- */

%typemap(in) (const char *path, size_t len), (const char *text, size_t len), (const char *content, size_t len),
             (const char *s, size_t len), (const char *spec, size_t len), (const char *key, size_t key_len),
             (const char *value, size_t value_len), (const char *name, size_t name_len),
             (const char *arguments, size_t arguments_len), (const char *tools_json, size_t len) {
  if (!di_py_text($input, (const char **)&$1, &$2)) SWIG_fail;
}

%typemap(in) (const int32_t *ids, size_t n), (const int32_t *eos_ids, size_t n_eos) {
  if (!di_py_ids($input, (int32_t **)&$1, &$2)) SWIG_fail;
}
%typemap(freearg) (const int32_t *ids, size_t n), (const int32_t *eos_ids, size_t n_eos) { free((void *)$1); }

/* Logit bias: a sequence of (token id, bias) pairs. */
%typemap(in) (const int32_t *ids, const float *bias, size_t n) (PyObject *seq = NULL) {
  seq = PySequence_Fast($input, "expected a sequence of (token id, bias) pairs");
  if (!seq) SWIG_fail;
  $3 = (size_t)PySequence_Fast_GET_SIZE(seq);
  $1 = (int32_t *)calloc($3 ? $3 : 1, sizeof(int32_t));
  $2 = (float *)calloc($3 ? $3 : 1, sizeof(float));
  if (!$1 || !$2) { PyErr_NoMemory(); SWIG_fail; }
  for (size_t i = 0; i < $3; ++i) {
    int32_t id = 0;
    double b = 0;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i), "id", &id, &b)) SWIG_fail;
    ((int32_t *)$1)[i] = id;
    ((float *)$2)[i] = (float)b;
  }
}
%typemap(freearg) (const int32_t *ids, const float *bias, size_t n) {
  Py_XDECREF(seq$argnum);
  free((void *)$1);
  free((void *)$2);
}

/* ---- borrowed views (copied into Python objects while the event lives) ----------------------- */

%typemap(in, numinputs=0) (const char **data, size_t *len) (const char *p = NULL, size_t n = 0) { $1 = ($1_ltype)&p; $2 = &n; }
%typemap(argout) (const char **data, size_t *len) {
  PyObject *o = PyUnicode_DecodeUTF8(*$1, (Py_ssize_t)*$2, "replace");
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}
%typemap(in, numinputs=0) (const int32_t **data, size_t *len) (const int32_t *p = NULL, size_t n = 0) { $1 = ($1_ltype)&p; $2 = &n; }
%typemap(argout) (const int32_t **data, size_t *len) {
  PyObject *o = di_py_int_list(*$1, *$2);
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}
/* Logprobs: a tuple (logprobs, ranks, top) where top[i] lists token i's (id, logprob) alternatives
 * (the padding of rows with fewer than k dropped). */
%typemap(in, numinputs=0) (const float **logprobs, const int32_t **ranks, const int32_t **top_ids,
                           const float **top_logprobs, size_t *n, size_t *k)
    (const float *lp = NULL, const int32_t *rk = NULL, const int32_t *ti = NULL, const float *tl = NULL, size_t nn = 0, size_t kk = 0) {
  $1 = ($1_ltype)&lp; $2 = ($2_ltype)&rk; $3 = ($3_ltype)&ti; $4 = ($4_ltype)&tl; $5 = &nn; $6 = &kk;
}
%typemap(argout) (const float **logprobs, const int32_t **ranks, const int32_t **top_ids,
                  const float **top_logprobs, size_t *n, size_t *k) {
  const size_t n_ = *$5, k_ = *$6;
  PyObject *lps = PyList_New((Py_ssize_t)n_), *tops = PyList_New((Py_ssize_t)n_), *ranks = NULL;
  if (!lps || !tops) { Py_XDECREF(lps); Py_XDECREF(tops); SWIG_fail; }
  ranks = di_py_int_list(*$2, n_);
  if (!ranks) { Py_DECREF(lps); Py_DECREF(tops); SWIG_fail; }
  for (size_t i = 0; i < n_; ++i) {
    PyList_SET_ITEM(lps, (Py_ssize_t)i, PyFloat_FromDouble((*$1)[i]));
    PyObject *row = PyList_New(0);
    for (size_t j = 0; row && j < k_ && (*$3)[i * k_ + j] >= 0; ++j) {
      PyObject *pair = Py_BuildValue("(id)", (*$3)[i * k_ + j], (double)(*$4)[i * k_ + j]);
      if (pair) { PyList_Append(row, pair); Py_DECREF(pair); }
    }
    PyList_SET_ITEM(tops, (Py_ssize_t)i, row ? row : Py_NewRef(Py_None));
  }
  $result = SWIG_Python_AppendOutput($result, Py_BuildValue("(NNN)", lps, ranks, tops));
}

/* ---- growable outputs ----------------------------------------------------------------------- */

%typemap(in, numinputs=0) di_py_i32 *out (di_py_i32 tmp = {NULL, 0, 0}), di_py_chars *out (di_py_chars tmp = {NULL, 0, 0}),
                          di_py_u32 *out (di_py_u32 tmp = {NULL, 0, 0}) { $1 = &tmp; }
%typemap(freearg) di_py_i32 *out, di_py_chars *out, di_py_u32 *out { free($1->data); }
%typemap(argout) di_py_i32 *out {
  PyObject *o = di_py_int_list($1->data, $1->len);
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}
%typemap(argout) di_py_chars *out {
  PyObject *o = PyUnicode_DecodeUTF8($1->data ? $1->data : "", (Py_ssize_t)$1->len, "replace");
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}
%typemap(argout) di_py_u32 *out {
  PyObject *o = PyBytes_FromStringAndSize((const char *)($1->data ? $1->data : (uint32_t *)""), (Py_ssize_t)($1->len * 4));
  if (!o) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, o);
}
%typemap(in, numinputs=0) di_py_bias *out (di_py_bias tmp = {NULL, NULL, 0, 0}) { $1 = &tmp; }
%typemap(freearg) di_py_bias *out { free($1->ids); free($1->bias); }
%typemap(argout) di_py_bias *out {
  PyObject *o = PyList_New((Py_ssize_t)$1->len);
  if (!o) SWIG_fail;
  for (size_t i = 0; i < $1->len; ++i) PyList_SET_ITEM(o, (Py_ssize_t)i, Py_BuildValue("(id)", $1->ids[i], (double)$1->bias[i]));
  $result = SWIG_Python_AppendOutput($result, o);
}

/* ---- callbacks ------------------------------------------------------------------------------ */

/* The load progress callback takes a Python callable (or None), kept alive by the module (keyed by
 * the configuration's handle, released by di_engine_config_free), so a temporary callable is safe. */
%ignore di_engine_config_set_progress_callback;
%ignore di_engine_config_free;
%rename(di_engine_config_set_progress_callback) di_py_engine_config_set_progress_callback;
%rename(di_engine_config_free) di_py_engine_config_free;
%nothread di_py_engine_config_set_progress_callback;
%nothread di_py_engine_config_free;
%typemap(in) PyObject *callback { $1 = $input; }
%inline %{
di_error *di_py_engine_config_set_progress_callback(di_engine_config *cfg, PyObject *callback) {
  if (callback != Py_None && !PyCallable_Check(callback)) {
    PyErr_SetString(PyExc_TypeError, "the progress callback must be callable or None");
    return NULL;
  }
  if (!di_py_progress_refs && !(di_py_progress_refs = PyDict_New())) return NULL;
  di_error *err = di_engine_config_set_progress_callback(cfg, callback == Py_None ? NULL : di_py_progress,
                                                         callback == Py_None ? NULL : (void *)callback);
  if (err) return err;
  PyObject *key = PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)cfg);
  if (!key) return NULL;
  if (callback == Py_None) {
    if (PyDict_DelItem(di_py_progress_refs, key) < 0) PyErr_Clear();
  } else {
    PyDict_SetItem(di_py_progress_refs, key, callback);
  }
  Py_DECREF(key);
  return NULL;
}
void di_py_engine_config_free(di_engine_config *cfg) {
  di_engine_config_free(cfg);
  if (!di_py_progress_refs) return;
  PyObject *key = PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)cfg);
  if (key && PyDict_DelItem(di_py_progress_refs, key) < 0) PyErr_Clear();
  Py_XDECREF(key);
}
%}
/* Event and log callbacks would run Python on the engine's step thread (stalling every session on
 * the GIL) or under the library's log lock: the package uses completion queues and the library's
 * stderr log instead. */
%ignore di_session_set_callback;
%ignore di_set_log_callback;

/* ---- (buf, cap, *out_len) calls, through retrying helpers ------------------------------------ */

%ignore di_engine_eos_tokens;
%ignore di_engine_weight_dtype;
%ignore di_engine_tokenize;
%ignore di_engine_detokenize;
%ignore di_sampling_get_logit_bias;
%ignore di_sampling_get_allowed_tokens;
%ignore di_sampling_get_stop_tokens;
%ignore di_sampling_get_stop_string;
%ignore di_session_context_tokens;
%ignore di_tokenizer_encode;
%ignore di_tokenizer_decode;
%ignore di_matcher_fill_mask;
/* Copies of what the views read in place (di_event_*_view). */
%ignore di_event_tokens;
%ignore di_event_text;
%ignore di_event_logprobs;

%rename(di_engine_eos_tokens) di_py_engine_eos_tokens;
%rename(di_engine_weight_dtype) di_py_engine_weight_dtype;
%rename(di_engine_tokenize) di_py_engine_tokenize;
%rename(di_engine_detokenize) di_py_engine_detokenize;
%rename(di_sampling_get_logit_bias) di_py_sampling_get_logit_bias;
%rename(di_sampling_get_allowed_tokens) di_py_sampling_get_allowed_tokens;
%rename(di_sampling_get_stop_tokens) di_py_sampling_get_stop_tokens;
%rename(di_sampling_get_stop_string) di_py_sampling_get_stop_string;
%rename(di_session_context_tokens) di_py_session_context_tokens;
%rename(di_tokenizer_encode) di_py_tokenizer_encode;
%rename(di_tokenizer_decode) di_py_tokenizer_decode;
%rename(di_matcher_fill_mask) di_py_matcher_fill_mask;

%inline %{
di_error *di_py_engine_eos_tokens(const di_engine *e, di_py_i32 *out) {
  DI_PY_DANCE(out, di_engine_eos_tokens(e, out->data, out->cap, &out->len))
}
di_error *di_py_engine_weight_dtype(const di_engine *e, di_py_chars *out) {
  DI_PY_DANCE(out, di_engine_weight_dtype(e, out->data, out->cap, &out->len))
}
di_error *di_py_engine_tokenize(const di_engine *e, const char *text, size_t len, di_text_flags flags, di_py_i32 *out) {
  DI_PY_DANCE(out, di_engine_tokenize(e, text, len, flags, out->data, out->cap, &out->len))
}
di_error *di_py_engine_detokenize(const di_engine *e, const int32_t *ids, size_t n, di_detok_flags flags, di_py_chars *out) {
  DI_PY_DANCE(out, di_engine_detokenize(e, ids, n, flags, out->data, out->cap, &out->len))
}
di_error *di_py_sampling_get_allowed_tokens(const di_sampling *sp, di_py_i32 *out) {
  DI_PY_DANCE(out, di_sampling_get_allowed_tokens(sp, out->data, out->cap, &out->len))
}
di_error *di_py_sampling_get_stop_tokens(const di_sampling *sp, di_py_i32 *out) {
  DI_PY_DANCE(out, di_sampling_get_stop_tokens(sp, out->data, out->cap, &out->len))
}
di_error *di_py_sampling_get_stop_string(const di_sampling *sp, size_t i, di_py_chars *out) {
  DI_PY_DANCE(out, di_sampling_get_stop_string(sp, i, out->data, out->cap, &out->len))
}
di_error *di_py_session_context_tokens(const di_session *s, di_py_i32 *out) {
  DI_PY_DANCE(out, di_session_context_tokens(s, out->data, out->cap, &out->len))
}
di_error *di_py_tokenizer_encode(const di_tokenizer *t, const char *text, size_t len, di_text_flags flags, di_py_i32 *out) {
  DI_PY_DANCE(out, di_tokenizer_encode(t, text, len, flags, out->data, out->cap, &out->len))
}
di_error *di_py_tokenizer_decode(const di_tokenizer *t, const int32_t *ids, size_t n, di_detok_flags flags, di_py_chars *out) {
  DI_PY_DANCE(out, di_tokenizer_decode(t, ids, n, flags, out->data, out->cap, &out->len))
}
/* The mask as bytes: (vocab_size + 31) / 32 little-endian uint32 words. */
di_error *di_py_matcher_fill_mask(di_matcher *m, di_py_u32 *out) {
  DI_PY_DANCE(out, di_matcher_fill_mask(m, out->data, out->cap, &out->len))
}
/* Biases as a list of (id, bias) pairs; the two buffers grow together. */
di_error *di_py_sampling_get_logit_bias(const di_sampling *sp, di_py_bias *out) {
  for (;;) {
    di_error *err = di_sampling_get_logit_bias(sp, out->ids, out->bias, out->cap, &out->len);
    if (!err || di_error_code(err) != DI_ERR_BUFFER_TOO_SMALL) return err;
    size_t cap_ids = 0, cap_bias = 0;
    if (!di_py_grow((void **)&out->ids, sizeof(int32_t), out->len, &cap_ids) ||
        !di_py_grow((void **)&out->bias, sizeof(float), out->len, &cap_bias))
      return err;
    di_error_free(err);
    out->cap = out->len;
  }
}
%}

%native(_set_error_factory) di_py_set_error_factory;
%{
static PyObject *di_py_set_error_factory(PyObject *self, PyObject *args) {
  PyObject *factory = NULL;
  (void)self;
  if (!PyArg_ParseTuple(args, "O:_set_error_factory", &factory)) return NULL;
  if (!PyCallable_Check(factory)) {
    PyErr_SetString(PyExc_TypeError, "the error factory must be callable");
    return NULL;
  }
  Py_INCREF(factory);
  Py_XSETREF(di_py_error_factory, factory);
  Py_RETURN_NONE;
}
%}

/* ---- calls that neither block nor call back keep the GIL ------------------------------------ */

%nothread di_version;
%nothread di_version_number;
%nothread di_abi_version;
%nothread di_code_name;
%nothread di_set_log_level;
%nothread di_event_free;
%nothread di_event_kind;
%nothread di_event_completion;
%nothread di_event_tokens_view;
%nothread di_event_text_view;
%nothread di_event_logprobs_view;
%nothread di_event_finish_reason;
%nothread di_event_usage;
%nothread di_event_seed;
%nothread di_event_error;
%nothread di_stats_get;
%nothread di_stats_free;
%nothread di_queue_fd;

%include "deepinfer.h"
