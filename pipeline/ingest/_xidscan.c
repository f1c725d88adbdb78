/* Native candidate-line scanner for kernel logs (see pipeline/ingest/xid_scan.py).
 *
 * The pure-Python scanner needs one memchr loop per anchor byte and a separate newline count,
 * each a full pass over the file. Here one sweep (64 bytes a step with AVX2 or SSE2 on x86-64,
 * a byte loop elsewhere) finds the newlines and the anchor bytes 'X' (Xid, SXid) and 'V'
 * (NVRM's map and fallen-off lines) together, plus the RTC boot marker when asked, and a file
 * is read in chunks into one reused buffer: no whole-file copy is ever made (allocating and
 * filling one costs more than the sweep). The lines found and their 1-based numbers are
 * handed back, with what Python needs to rewrite the few journal or wrapped lines; the rest
 * of the parse stays in Python.
 *
 * Semantics are those of xid_scan.py's pure-Python scanner: a line is what lies between
 * '\n' bytes (a '\r' is text), a candidate is a line holding "Xid", one of DRIVER_HEADS, or
 * (uptime logs only) "setting system clock to".
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_SIMD 1
#endif

/* "NVRM: GPU " covers the map ("GPU at"), serial ("GPU Board Serial") and per-GPU lines
 * ("GPU 0000:01:00.0: GPU has fallen off the bus.", "... RmInitAdapter failed!"). */
static const char *const DRIVER_HEADS[] = {
    "NVRM: GPU ", "NVRM: The NVIDIA GPU", "NVRM: fallen off", "NVRM: RmInitAdapter failed",
};
#define N_HEADS (sizeof DRIVER_HEADS / sizeof DRIVER_HEADS[0])
/* The RTC boot marker, found by its rarer middle "m cl" (CLOCK_AT bytes in). */
static const char CLOCK[] = "setting system clock to";
#define CLOCK_LEN (sizeof CLOCK - 1)
#define CLOCK_AT 13
/* wrapped_tail() in xid_journal.py rejects a next line longer than this, so no more is copied. */
#define NEXT_MAX 401

enum { F_XID = 1, F_OTHER = 2 };

typedef struct {
    Py_ssize_t start; /* offset in the region */
    long long no;
    int flags;
} Cand;

typedef struct {
    int uptime, simd;      /* simd: 0 none, 1 SSE2, 2 the best the CPU has */
    PyObject *lines;       /* list of (line_no, line) */
    PyObject *special;     /* list of (index in lines, file offset, is_xid, next_line) */
    long long no;          /* number of the line the next region starts with */
    long long base;        /* file offset of the next region */
    long long newlines;
    int last_nl;           /* the last byte seen was '\n' (or nothing was seen) */
    long long seen;        /* bytes seen */
    Py_ssize_t pending;    /* index in lines of an Xid line whose next line is not read yet, or -1 */
    long long pending_at;  /* its file offset */
    Cand *cands;
    Py_ssize_t n_cands, cap_cands;
} Scan;

static int
mark(Scan *s, Py_ssize_t ls, long long no, int flag)
{
    if (s->n_cands && s->cands[s->n_cands - 1].start == ls) {
        s->cands[s->n_cands - 1].flags |= flag;
        return 0;
    }
    if (s->n_cands == s->cap_cands) {
        Py_ssize_t cap = s->cap_cands ? 2 * s->cap_cands : 256;
        Cand *c = PyMem_Realloc(s->cands, (size_t)cap * sizeof(Cand));
        if (!c) {
            PyErr_NoMemory();
            return -1;
        }
        s->cands = c;
        s->cap_cands = cap;
    }
    s->cands[s->n_cands++] = (Cand){ls, no, flag};
    return 0;
}

/* What the byte at j ('X', 'V' or, in an uptime log, 'm') makes of its line (start ls, number no). */
static int
event(Scan *s, const char *p, Py_ssize_t n, Py_ssize_t j, Py_ssize_t ls, long long no)
{
    switch (p[j]) {
    case 'X':
        if (j + 2 < n && p[j + 1] == 'i' && p[j + 2] == 'd')
            return mark(s, ls, no, F_XID);
        break;
    case 'V':
        if (j >= 1 && p[j - 1] == 'N')
            for (size_t h = 0; h < N_HEADS; h++) {
                size_t len = strlen(DRIVER_HEADS[h]);
                if ((size_t)(n - (j - 1)) >= len && memcmp(p + j - 1, DRIVER_HEADS[h], len) == 0)
                    return mark(s, ls, no, F_OTHER);
            }
        break;
    case 'm':
        if (s->uptime && j >= CLOCK_AT && n - (j - CLOCK_AT) >= (Py_ssize_t)CLOCK_LEN
            && memcmp(p + j - CLOCK_AT, CLOCK, CLOCK_LEN) == 0)
            return mark(s, ls, no, F_OTHER);
        break;
    }
    return 0;
}

#ifdef HAVE_SIMD
/* Two sweeps of 64-byte blocks over whole lines, leaving the last bytes (and 3 more for the
 * clock marker's look-ahead) to the scalar loop: SSE2 (every x86-64) and AVX2 (chosen at run
 * time). Both find the event bytes 'X', 'V' and, in uptime logs, the 'm' of "m cl". */

/* Where "m cl" starts among the 16 bytes at p (reads 3 bytes past them). */
static inline __attribute__((always_inline)) __m128i
clock_sse2(const char *p)
{
    return _mm_and_si128(
        _mm_and_si128(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), _mm_set1_epi8('m')),
                      _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + 1)), _mm_set1_epi8(' '))),
        _mm_and_si128(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + 2)), _mm_set1_epi8('c')),
                      _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + 3)), _mm_set1_epi8('l'))));
}

/* Bit masks of each block's newlines and event bytes; the line start moves with each newline. */
static Py_ssize_t
blocks_sse2(Scan *s, const char *p, Py_ssize_t n, long long *no_io, Py_ssize_t *ls_io)
{
    const __m128i nl = _mm_set1_epi8('\n'), x = _mm_set1_epi8('X'), v = _mm_set1_epi8('V');
    Py_ssize_t j = 0, stop = n - 64 - 3, ls = *ls_io;
    long long no = *no_io;
    for (; j <= stop; j += 64) {
        uint64_t m_nl = 0, m_ev = 0;
        for (int k = 0; k < 64; k += 16) {
            __m128i b = _mm_loadu_si128((const __m128i *)(p + j + k));
            __m128i e = _mm_or_si128(_mm_cmpeq_epi8(b, x), _mm_cmpeq_epi8(b, v));
            if (s->uptime)
                e = _mm_or_si128(e, clock_sse2(p + j + k));
            m_nl |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(b, nl)) << k;
            m_ev |= (uint64_t)(uint16_t)_mm_movemask_epi8(e) << k;
        }
        if (!m_ev) {
            if (m_nl) {
                no += __builtin_popcountll(m_nl);
                ls = j + 64 - __builtin_clzll(m_nl); /* after the block's last '\n' */
            }
            continue;
        }
        for (uint64_t all = m_nl | m_ev; all; all &= all - 1) {
            int bit = __builtin_ctzll(all);
            if (m_nl >> bit & 1) {
                no++;
                ls = j + bit + 1;
            }
            else if (event(s, p, n, j + bit, ls, no) < 0)
                return -1;
        }
    }
    *no_io = no;
    *ls_io = ls;
    return j;
}

/* Where "m cl" starts among the 32 bytes at p (reads 3 bytes past them). */
static inline __attribute__((always_inline, target("avx2"))) __m256i
clock_avx2(const char *p)
{
    return _mm256_and_si256(
        _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)p), _mm256_set1_epi8('m')),
                         _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(p + 1)), _mm256_set1_epi8(' '))),
        _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(p + 2)), _mm256_set1_epi8('c')),
                         _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(p + 3)), _mm256_set1_epi8('l'))));
}

static inline __attribute__((always_inline, target("avx2"))) long long
lane_sum(__m256i acc)
{
    __m256i s = _mm256_sad_epu8(acc, _mm256_setzero_si256());
    return _mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 1) + _mm256_extract_epi64(s, 2)
           + _mm256_extract_epi64(s, 3);
}

/* As blocks_sse2, but a block without an event byte only adds its newlines to per-lane
 * counters (at most 2 a block: summed every 127 blocks); the start of an event's line is
 * looked up backwards when it is needed. */
static __attribute__((target("avx2,popcnt,bmi"))) Py_ssize_t
blocks_avx2(Scan *s, const char *p, Py_ssize_t n, long long *no_io, Py_ssize_t *ls_io)
{
    const __m256i nl = _mm256_set1_epi8('\n'), x = _mm256_set1_epi8('X'), v = _mm256_set1_epi8('V');
    const int clock = s->uptime;
    Py_ssize_t j = 0, stop = n - 64 - 3, ls = *ls_io;
    long long no = *no_io, ls_no = no; /* no: the number of the line at j; ls starts line ls_no */
    while (j <= stop) {
        __m256i acc = _mm256_setzero_si256(), b0, b1, e0, e1;
        Py_ssize_t batch = j + 127 * 64;
        int hit = 0;
        for (; j <= stop && j < batch; j += 64) {
            b0 = _mm256_loadu_si256((const __m256i *)(p + j));
            b1 = _mm256_loadu_si256((const __m256i *)(p + j + 32));
            e0 = _mm256_or_si256(_mm256_cmpeq_epi8(b0, x), _mm256_cmpeq_epi8(b0, v));
            e1 = _mm256_or_si256(_mm256_cmpeq_epi8(b1, x), _mm256_cmpeq_epi8(b1, v));
            if (clock) {
                e0 = _mm256_or_si256(e0, clock_avx2(p + j));
                e1 = _mm256_or_si256(e1, clock_avx2(p + j + 32));
            }
            __m256i e = _mm256_or_si256(e0, e1);
            if (!_mm256_testz_si256(e, e)) {
                hit = 1;
                break;
            }
            acc = _mm256_sub_epi8(acc, _mm256_cmpeq_epi8(b0, nl));
            acc = _mm256_sub_epi8(acc, _mm256_cmpeq_epi8(b1, nl));
        }
        no += lane_sum(acc);
        if (!hit)
            continue;
        if (no != ls_no) { /* a newline since ls: the last one before j starts the line */
            Py_ssize_t q = j - 1;
            while (q >= ls && p[q] != '\n')
                q--;
            ls = q + 1;
            ls_no = no;
        }
        uint64_t m_nl = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b0, nl))
                        | (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(b1, nl)) << 32;
        uint64_t m_ev = (uint32_t)_mm256_movemask_epi8(e0) | (uint64_t)(uint32_t)_mm256_movemask_epi8(e1) << 32;
        for (uint64_t all = m_nl | m_ev; all; all &= all - 1) {
            int bit = __builtin_ctzll(all);
            if (m_nl >> bit & 1) {
                no++;
                ls = j + bit + 1;
                ls_no = no;
            }
            else if (event(s, p, n, j + bit, ls, no) < 0)
                return -1;
        }
        j += 64;
    }
    if (no != ls_no) {
        Py_ssize_t q = j - 1;
        while (q >= ls && p[q] != '\n')
            q--;
        ls = q + 1;
    }
    *no_io = no;
    *ls_io = ls;
    return j;
}

static int use_avx2;
#endif

/* Every candidate line of p[:n], which starts a line; *no is the number of that line. */
static int
sweep(Scan *s, const char *p, Py_ssize_t n, long long *no)
{
    Py_ssize_t ls = 0, j = 0;
#ifdef HAVE_SIMD
    if (s->simd)
        j = s->simd > 1 && use_avx2 ? blocks_avx2(s, p, n, no, &ls) : blocks_sse2(s, p, n, no, &ls);
    if (j < 0)
        return -1;
#endif
    for (; j < n; j++) {
        char c = p[j];
        if (c == '\n') {
            (*no)++;
            ls = j + 1;
        }
        else if ((c == 'X' || c == 'V' || c == 'm') && event(s, p, n, j, ls, *no) < 0)
            return -1;
    }
    return 0;
}

/* What follows the Xid line 'line' that may be its wrapped tail: the line at p[from:] (at most
 * NEXT_MAX bytes of it), or None where wrapped_tail() in xid_journal.py rejects it at once:
 * it opens with the Xid line's first 3 bytes, a record of its own (the usual case). */
static PyObject *
next_line(const char *line, const char *p, Py_ssize_t n, Py_ssize_t from)
{
    if (n - from >= 3 && memcmp(p + from, line, 3) == 0 && line[0] != ' ' && line[0] != '\t')
        Py_RETURN_NONE;
    Py_ssize_t lim = n - from < NEXT_MAX ? n - from : NEXT_MAX;
    const char *e = memchr(p + from, '\n', (size_t)lim);
    return PyBytes_FromStringAndSize(p + from, e ? e - (p + from) : lim);
}

/* Line k of the output (file offset 'at', its first byte 'first') may need rewriting in
 * Python: a journal JSON or verbose entry, or an Xid line that may have a wrapped tail in
 * 'next' (a new reference, None when it cannot; NULL on error). */
static int
settle(Scan *s, Py_ssize_t k, long long at, char first, int is_xid, PyObject *next)
{
    if (!next)
        return -1;
    int rc = 0;
    if (first == '{' || first == ' ' || first == '\t' || (is_xid && next != Py_None)) {
        PyObject *t = Py_BuildValue("(nLOO)", k, at, is_xid ? Py_True : Py_False, next);
        rc = t ? PyList_Append(s->special, t) : -1;
        Py_XDECREF(t);
    }
    Py_DECREF(next);
    return rc;
}

/* One region: whole lines, the last one unterminated only at the end of the file. */
static int
region(Scan *s, const char *p, Py_ssize_t n, int eof)
{
    if (n) {
        s->seen += n;
        s->last_nl = p[n - 1] == '\n';
    }
    if (s->pending >= 0) {
        Py_ssize_t k = s->pending;
        const char *line = PyBytes_AS_STRING(PyTuple_GET_ITEM(PyList_GET_ITEM(s->lines, k), 1));
        s->pending = -1;
        if (settle(s, k, s->pending_at, line[0], 1, next_line(line, p, n, 0)) < 0)
            return -1;
    }
    long long no = s->no;
    s->n_cands = 0;
    if (sweep(s, p, n, &no) < 0)
        return -1;
    for (Py_ssize_t c = 0; c < s->n_cands; c++) {
        const char *line = p + s->cands[c].start, *e = memchr(line, '\n', (size_t)(p + n - line));
        Py_ssize_t end = e ? e - p : n;
        PyObject *t = Py_BuildValue("(Ly#)", s->cands[c].no, line, (Py_ssize_t)(p + end - line));
        if (!t || PyList_Append(s->lines, t) < 0) {
            Py_XDECREF(t);
            return -1;
        }
        Py_DECREF(t);
        Py_ssize_t k = PyList_GET_SIZE(s->lines) - 1;
        long long at = s->base + (line - p);
        int is_xid = s->cands[c].flags & F_XID;
        PyObject *next;
        if (!is_xid || end == n)  /* not an Xid line, or no '\n' after it: the end of the file */
            next = Py_NewRef(Py_None);
        else if (end + 1 < n || eof)
            next = next_line(line, p, n, end + 1);
        else {  /* its next line is in the next region */
            s->pending = k;
            s->pending_at = at;
            continue;
        }
        if (settle(s, k, at, line[0], is_xid, next) < 0)
            return -1;
    }
    s->newlines += no - s->no;
    s->no = no;
    s->base += n;
    return 0;
}

static PyObject *
finish(Scan *s, int ok)
{
    PyMem_Free(s->cands);
    if (!ok) {
        Py_CLEAR(s->lines);
        Py_CLEAR(s->special);
        return NULL;
    }
    long long n_lines = s->seen ? s->newlines + !s->last_nl : 0;
    return Py_BuildValue("(NNL)", s->lines, s->special, n_lines);
}

static int
init(Scan *s, int uptime, int simd)
{
    memset(s, 0, sizeof *s);
    s->uptime = uptime;
    s->simd = simd;
    s->no = 1;
    s->last_nl = 1;
    s->pending = -1;
    s->lines = PyList_New(0);
    s->special = PyList_New(0);
    if (s->lines && s->special)
        return 0;
    Py_CLEAR(s->lines);
    Py_CLEAR(s->special);
    return -1;
}

PyDoc_STRVAR(scan_doc,
"scan(buf, uptime, simd=2) -> (lines, special, n_lines)\n\n"
"Candidate lines of a whole log held in memory: a list of (line_no, line) in file order; those\n"
"that may need rewriting (their first byte is '{', ' ' or tab, or they are Xid lines whose next\n"
"line may be their wrapped tail) as (index in lines, file offset, is_xid, next_line), next_line\n"
"being the start (at most 401 bytes) of that next line or None; and the number of lines.\n"
"simd: 0 none, 1 SSE2, 2 the best the CPU has (for tests; the results are the same).");

static PyObject *
scan(PyObject *mod, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"buf", "uptime", "simd", NULL};
    Py_buffer b;
    int uptime, simd = 2;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*p|i", kwlist, &b, &uptime, &simd))
        return NULL;
    Scan s;
    if (init(&s, uptime, simd) < 0) {
        PyBuffer_Release(&b);
        return NULL;
    }
    int ok = region(&s, b.buf, b.len, 1) == 0;
    PyBuffer_Release(&b);
    return finish(&s, ok);
}

PyDoc_STRVAR(scan_fd_doc,
"scan_fd(fd, uptime, head=b'', chunk=262144, simd=2) -> (lines, special, n_lines)\n\n"
"As scan() for the bytes 'head' followed by what is read from the file descriptor 'fd' to its\n"
"end, read in chunks into one reused buffer (it grows only to hold a line longer than it).");

static PyObject *
scan_fd(PyObject *mod, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"fd", "uptime", "head", "chunk", "simd", NULL};
    int fd, uptime, simd = 2;
    Py_buffer head = {0};
    Py_ssize_t chunk = 1 << 18;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ip|y*ni", kwlist, &fd, &uptime, &head, &chunk, &simd))
        return NULL;
    if (chunk < 1)
        chunk = 1;
    Py_ssize_t cap = chunk > head.len ? chunk : head.len, len = head.len;
    char *buf = PyMem_Malloc((size_t)cap);
    Scan s;
    if (!buf || init(&s, uptime, simd) < 0) {
        PyMem_Free(buf);
        if (head.obj)
            PyBuffer_Release(&head);
        return buf ? NULL : PyErr_NoMemory();
    }
    if (head.obj) {
        memcpy(buf, head.buf, (size_t)head.len);
        PyBuffer_Release(&head);
    }
    int ok = 0;
    Py_ssize_t clean = 0;  /* buf[:clean] holds no '\n' (the carried start of a line) */
    for (;;) {
        if (len == cap) {  /* a line longer than the buffer */
            char *bigger = PyMem_Realloc(buf, (size_t)cap * 2);
            if (!bigger) {
                PyErr_NoMemory();
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t r;
        Py_BEGIN_ALLOW_THREADS
        r = read(fd, buf + len, (size_t)(cap - len));
        Py_END_ALLOW_THREADS
        if (r < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0)
                    break;
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            break;
        }
        if (r == 0) {
            ok = region(&s, buf, len, 1) == 0;
            break;
        }
        len += r;
        Py_ssize_t last = len - 1;
        while (last >= clean && buf[last] != '\n')
            last--;
        if (last < clean) {
            clean = len;
            continue;
        }
        if (region(&s, buf, last + 1, 0) < 0)
            break;
        len -= last + 1;
        memmove(buf, buf + last + 1, (size_t)len);
        clean = len;
    }
    PyMem_Free(buf);
    return finish(&s, ok);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_VARARGS | METH_KEYWORDS, scan_doc},
    {"scan_fd", (PyCFunction)(void (*)(void))scan_fd, METH_VARARGS | METH_KEYWORDS, scan_fd_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_xidscan",
    "Native candidate-line scanner for kernel logs (see pipeline.ingest.xid_scan).", -1, methods,
};

PyMODINIT_FUNC
PyInit__xidscan(void)
{
#ifdef HAVE_SIMD
    __builtin_cpu_init();
    use_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi");
#endif
    return PyModule_Create(&module);
}
