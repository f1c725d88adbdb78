/* Native reader for clean nvidia-smi CSV blocks (see pipeline/ingest/smi_native.py).
 *
 * DuckDB's CSV reader hands unit-laden cells ("45 %", "627.40 W", "[N/A]", "0x...04") over as
 * text, and cleaning them in SQL costs more than reading the file. Here one pass over a block
 * of whole lines splits each line on ", ", parses the timestamp, numbers (their unit cut),
 * Yes/No words and hex masks straight into typed columns with validity bitmaps, and numbers
 * each line's GPU identity (index, name, serial, uuid, bus id: the cells the facts group by)
 * through a small hash table, so the identity texts travel once per GPU, not once per line.
 *
 * It only ever accepts what it reads exactly as the SQL cleaning in smi_fields.py would
 * (DuckDB's TRY_CAST / try_strptime), and declines a whole block at the first thing it is not
 * sure of: a byte that is not printable ASCII, a blank line, a wrong number of cells, a comma
 * not followed by a space, a cell with a space at either end, an unreadable value. The caller
 * then reads the file through DuckDB as before, so a declined block only costs time.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* SSE2 on x86-64 (all of it has SSE2); a byte loop elsewhere (aarch64: Grace hosts) or with
 * -DSMISCAN_SCALAR, which the tests' comparison of the two builds uses. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(SMISCAN_SCALAR)
#define HAVE_SSE2 1
#include <emmintrin.h>
#endif

#define MAX_FIELDS 1024
#define MAX_IDS 16

enum { K_IGNORE = 'i', K_TEXT = 't', K_NUM = 'n', K_MASK = 'm', K_TS = 's' };

typedef struct {
    uint64_t hash;
    const char *at[MAX_IDS];
    int len[MAX_IDS];
} Ident;

typedef struct {
    int nf, nt;                 /* fields; identity (text) fields */
    const char *kinds;
    const char *unit[MAX_FIELDS];
    Py_ssize_t unit_len[MAX_FIELDS];
    int slot[MAX_FIELDS];       /* value column of a num/mask field, or -1 */
    /* outputs */
    int32_t *gid;
    int64_t *ts;
    void **data;                /* per value column: double[] or int64_t[] */
    uint8_t **valid;            /* per value column: validity bitmap, bit set = present */
    Py_ssize_t *nulls;
    /* identities */
    Ident *ids;
    int n_ids, cap_ids;
    int32_t *table;             /* open addressing: index in ids, or -1 */
    int table_cap;
    /* decline */
    const char *why;
    Py_ssize_t where;
} Scan;

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static inline int
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t
days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static inline int
two(const char *p)
{
    return is_digit(p[0]) && is_digit(p[1]) ? (p[0] - '0') * 10 + (p[1] - '0') : -1;
}

/* "YYYY/MM/DD HH:MM:SS[.f]" or "YYYY-MM-DD[ T]HH:MM:SS[.f]" (1-6 fraction digits), the
 * formats of smi_fields.TIMESTAMP_FORMATS, zero-padded: microseconds since the epoch
 * (naive). Anything else (DuckDB would take "2026/7/1" too) is declined. */
static int
parse_ts(const char *p, const char *e, int64_t *out)
{
    Py_ssize_t n = e - p;
    if (n < 19)
        return -1;
    for (int i = 0; i < 4; i++)
        if (!is_digit(p[i]))
            return -1;
    int year = (p[0] - '0') * 1000 + (p[1] - '0') * 100 + (p[2] - '0') * 10 + (p[3] - '0');
    char sep = p[4];
    if ((sep != '/' && sep != '-') || p[7] != sep || !(p[10] == ' ' || (sep == '-' && p[10] == 'T'))
        || p[13] != ':' || p[16] != ':')
        return -1;
    int mon = two(p + 5), day = two(p + 8), hh = two(p + 11), mm = two(p + 14), ss = two(p + 17);
    if (year < 1 || mon < 1 || mon > 12 || day < 1 || hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 || ss > 59)
        return -1;
    static const int DIM[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if (day > DIM[mon - 1] + (mon == 2 && leap))
        return -1;
    int64_t frac = 0;
    if (n > 19) {
        if (p[19] != '.' || n == 20 || n > 26)
            return -1;
        int digits = 0;
        for (const char *q = p + 20; q < e; q++, digits++) {
            if (!is_digit(*q))
                return -1;
            frac = frac * 10 + (*q - '0');
        }
        for (; digits < 6; digits++)
            frac *= 10;
    }
    *out = (days_from_civil(year, (unsigned)mon, (unsigned)day) * 86400 + hh * 3600 + mm * 60 + ss) * 1000000 + frac;
    return 0;
}

/* A marker: empty, "N/A" or anything starting with '[' (smi_fields.marker_sql). */
static inline int
is_marker(const char *p, const char *e)
{
    return p == e || *p == '[' || (e - p == 3 && memcmp(p, "N/A", 3) == 0);
}

static int
word_value(const char *p, Py_ssize_t n, double *out)
{
    static const char *const T[] = {"Yes", "Enabled", "Active"}, *const F[] = {"No", "Disabled", "Not Active"};
    for (int i = 0; i < 3; i++) {
        if ((size_t)n == strlen(T[i]) && memcmp(p, T[i], (size_t)n) == 0) {
            *out = 1.0;
            return 0;
        }
        if ((size_t)n == strlen(F[i]) && memcmp(p, F[i], (size_t)n) == 0) {
            *out = 0.0;
            return 0;
        }
    }
    return -1;
}

/* "-?[0-9]+(\.[0-9]+)?" as a correctly rounded double (what DuckDB's cast gives): exact
 * mantissa over an exact power of ten when it fits (one correctly rounded division),
 * strtod otherwise. */
static int
parse_number(const char *p, const char *e, double *out)
{
    const char *s = p;
    int neg = 0;
    if (s < e && *s == '-') {
        neg = 1;
        s++;
    }
    uint64_t m = 0;
    int sig = 0, frac = 0, any = 0;
    for (; s < e && is_digit(*s); s++, any++)
        if (m || *s != '0') {
            m = m * 10 + (uint64_t)(*s - '0');
            if (++sig > 19)
                break;
        }
    if (!any)
        return -1;
    if (sig <= 19 && s < e && *s == '.') {
        s++;
        const char *f = s;
        for (; s < e && is_digit(*s); s++, frac++)
            if (m || *s != '0') {
                m = m * 10 + (uint64_t)(*s - '0');
                if (++sig > 19)
                    break;
            }
        if (s == f)
            return -1;
    }
    if (sig <= 15 && frac <= 22 && s == e) {
        double v = (double)m / POW10[frac];
        *out = neg ? -v : v;
        return 0;
    }
    /* long or precise: check the shape, then let strtod round */
    s = p + neg;
    while (s < e && is_digit(*s))
        s++;
    if (s < e && *s == '.') {
        const char *f = ++s;
        while (s < e && is_digit(*s))
            s++;
        if (s == f)
            return -1;
    }
    char tmp[128];
    if (s != e || e - p >= (Py_ssize_t)sizeof tmp)
        return -1;
    memcpy(tmp, p, (size_t)(e - p));
    tmp[e - p] = '\0';
    *out = strtod(tmp, NULL);
    return 0;
}

/* smi_fields.clean_sql for a "num" field: marker -> null, letters -> Yes/No words, else the
 * number with the header's unit cut. 1: value, 0: null, -1: decline. */
static int
parse_num(const char *p, const char *e, const char *unit, Py_ssize_t ul, double *out)
{
    if (is_marker(p, e))
        return 0;
    if ((unsigned char)*p >= 65)
        return word_value(p, e - p, out) == 0 ? 1 : -1;
    if (ul && e - p >= ul && memcmp(e - ul, unit, (size_t)ul) == 0)
        e -= ul;
    return parse_number(p, e, out) == 0 ? 1 : -1;
}

/* A hex (0x...) or decimal mask that fits a BIGINT. 1: value, 0: null, -1: decline. */
static int
parse_mask(const char *p, const char *e, int64_t *out)
{
    if (is_marker(p, e))
        return 0;
    uint64_t v = 0;
    if (e - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        for (p += 2; p < e; p++) {
            int d = is_digit(*p) ? *p - '0' : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10
                                              : (*p >= 'A' && *p <= 'F') ? *p - 'A' + 10 : -1;
            if (d < 0 || v > (uint64_t)INT64_MAX >> 4)
                return -1;
            v = v << 4 | (uint64_t)d;
        }
    } else {
        if (p == e)
            return -1;
        for (; p < e; p++) {
            if (!is_digit(*p) || v > ((uint64_t)INT64_MAX - 9) / 10)
                return -1;
            v = v * 10 + (uint64_t)(*p - '0');
        }
    }
    if (v > (uint64_t)INT64_MAX)
        return -1;
    *out = (int64_t)v;
    return 1;
}

static int
grow_table(Scan *s)
{
    int cap = s->table_cap ? s->table_cap * 2 : 256;
    int32_t *t = malloc((size_t)cap * sizeof *t);
    if (!t)
        return -1;
    memset(t, 0xff, (size_t)cap * sizeof *t);
    for (int i = 0; i < s->n_ids; i++) {
        size_t k = s->ids[i].hash & (size_t)(cap - 1);
        while (t[k] >= 0)
            k = (k + 1) & (size_t)(cap - 1);
        t[k] = i;
    }
    free(s->table);
    s->table = t;
    s->table_cap = cap;
    return 0;
}

/* The number of the line's identity (cells at[]/len[]), a new one if unseen. -1: no memory. */
static int32_t
identity(Scan *s, const char **at, const int *len)
{
    /* Hash each cell's length and last 8 bytes (where serials, uuids and bus ids differ);
     * equal hashes are told apart by comparing the cells whole. */
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (int j = 0; j < s->nt; j++) {
        uint64_t w = 0;
        int n = len[j] < 8 ? len[j] : 8;
        memcpy(&w, at[j] + len[j] - n, (size_t)n);
        h = (h ^ w ^ ((uint64_t)len[j] << 56)) * 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
    }
    if (2 * (s->n_ids + 1) > s->table_cap && grow_table(s) < 0)
        return -1;
    size_t k = h & (size_t)(s->table_cap - 1);
    for (; s->table[k] >= 0; k = (k + 1) & (size_t)(s->table_cap - 1)) {
        Ident *id = &s->ids[s->table[k]];
        if (id->hash != h)
            continue;
        int same = 1;
        for (int j = 0; j < s->nt && same; j++)
            same = id->len[j] == len[j] && memcmp(id->at[j], at[j], (size_t)len[j]) == 0;
        if (same)
            return s->table[k];
    }
    if (s->n_ids == s->cap_ids) {
        int cap = s->cap_ids ? s->cap_ids * 2 : 64;
        Ident *ids = realloc(s->ids, (size_t)cap * sizeof *ids);
        if (!ids)
            return -1;
        s->ids = ids;
        s->cap_ids = cap;
    }
    Ident *id = &s->ids[s->n_ids];
    id->hash = h;
    for (int j = 0; j < s->nt; j++) {
        id->at[j] = at[j];
        id->len[j] = len[j];
    }
    s->table[k] = s->n_ids;
    return s->n_ids++;
}

#define DECLINE(msg, at)      \
    do {                      \
        s->why = (msg);       \
        s->where = (at);      \
        return -1;            \
    } while (0)

/* One line into row r: its cells end at the separators pos[*k]... (',' or '\n'; the end of
 * the block for a last line without '\n'), which the structural pass found. */
static int
line(Scan *s, const char *base, const char *end, const uint32_t *pos, Py_ssize_t npos, Py_ssize_t *k,
     const char *p, Py_ssize_t r)
{
    const char *at[MAX_IDS];
    int len[MAX_IDS], t = 0;
    const char *line_at = p;
    for (int f = 0; f < s->nf; f++) {
        const char *ce = *k < npos ? base + pos[*k] : end;
        (*k)++;
        char sep = ce < end ? *ce : '\n';
        if (f < s->nf - 1) {
            if (sep != ',')
                DECLINE(ce == line_at ? "blank line" : "fewer cells than fields", line_at - base);
            if (ce + 1 >= end || ce[1] != ' ')
                DECLINE("a comma without a space", line_at - base);
        } else {
            if (sep != '\n')
                DECLINE("more cells than fields", line_at - base);
            if (ce > p && ce[-1] == '\r')
                ce--;
        }
        int c, slot = s->slot[f];
        switch (s->kinds[f]) {
        case K_TS:
            if (parse_ts(p, ce, &s->ts[r]) < 0)
                DECLINE("timestamp", line_at - base);
            break;
        case K_TEXT:
            if (p == ce || *p == ' ' || ce[-1] == ' ')
                DECLINE("identity cell empty or padded", line_at - base);
            at[t] = p;
            len[t++] = (int)(ce - p);
            break;
        case K_NUM:
            c = parse_num(p, ce, s->unit[f], s->unit_len[f], &((double *)s->data[slot])[r]);
            goto value;
        case K_MASK:
            c = parse_mask(p, ce, &((int64_t *)s->data[slot])[r]);
        value:
            if (c < 0)
                DECLINE("value", line_at - base);
            if (c) {
                s->valid[slot][r >> 3] |= (uint8_t)(1u << (r & 7));
            } else {
                s->nulls[slot]++;
                ((int64_t *)s->data[slot])[r] = 0; /* a null's slot too: the same bytes every run */
            }
            break;
        default:
            break;
        }
        p = ce + 2;
    }
    int32_t g = identity(s, at, len);
    if (g < 0)
        DECLINE("out of memory", line_at - base);
    s->gid[r] = g;
    return 0;
}

/* Appends the offsets (base + bit) of m's set bits to out[*n]: eight at a time without a
 * branch per bit (a cell boundary every ~10 bytes would mispredict a bit-by-bit loop). */
static inline __attribute__((always_inline)) void
flatten(uint32_t *out, Py_ssize_t *n, uint32_t base, uint64_t m)
{
    int cnt = __builtin_popcountll(m);
    uint32_t *o = out + *n;
    for (int i = 0; i < 8; i++) {  /* past the last bit: harmless garbage, overwritten later */
        o[i] = base + (uint32_t)__builtin_ctzll(m | (1ULL << 63));
        m &= m - 1;
    }
    for (int i = 8; i < cnt; i++) {
        o[i] = base + (uint32_t)__builtin_ctzll(m);
        m &= m - 1;
    }
    *n += cnt;
}

/* The structural pass: offsets of every ',' and '\n' into pos (room for n + 64), the number of
 * '\n' in *lines; -1 when a byte is neither printable ASCII nor a line end (a '\r' ends a line
 * only before '\n' or as the block's last byte). */
static inline __attribute__((always_inline)) Py_ssize_t
index_impl(const char *p, Py_ssize_t n, uint32_t *pos, Py_ssize_t *lines)
{
    Py_ssize_t npos = 0, i = 0, nl = 0;
    int cr_open = 0;  /* the byte before i was '\r' */
#ifdef HAVE_SSE2
    const __m128i comma = _mm_set1_epi8(','), lf = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'),
                  lo = _mm_set1_epi8(0x1f), hi = _mm_set1_epi8(0x7f);
    uint64_t bad = 0;
    for (; i + 64 <= n; i += 64) {
        uint64_t m = 0, l = 0, r = 0, b = 0;
        for (int j = 0; j < 4; j++) {
            __m128i x = _mm_loadu_si128((const __m128i *)(p + i + 16 * j));
            __m128i is_lf = _mm_cmpeq_epi8(x, lf), is_cr = _mm_cmpeq_epi8(x, cr);
            /* signed compares: bytes >= 0x80 are negative, so they fail x > 0x1f */
            __m128i ok = _mm_or_si128(_mm_and_si128(_mm_cmpgt_epi8(x, lo), _mm_cmplt_epi8(x, hi)),
                                      _mm_or_si128(is_lf, is_cr));
            m |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, comma), is_lf)) << (16 * j);
            l |= (uint64_t)(uint16_t)_mm_movemask_epi8(is_lf) << (16 * j);
            r |= (uint64_t)(uint16_t)_mm_movemask_epi8(is_cr) << (16 * j);
            b |= (uint64_t)(uint16_t)~_mm_movemask_epi8(ok) << (16 * j);
        }
        /* each '\r' needs a '\n' right after it (bit 63's is the next chunk's bit 0) */
        bad |= b | (r & ~(l >> 1) & ~(1ULL << 63)) | (uint64_t)(cr_open && !(l & 1));
        cr_open = (int)(r >> 63);
        nl += __builtin_popcountll(l);
        if (m)
            flatten(pos, &npos, (uint32_t)i, m);
    }
    if (bad)
        return -1;
#endif
    for (; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (cr_open && c != '\n')
            return -1;
        cr_open = c == '\r';
        if (c == ',' || c == '\n') {
            pos[npos++] = (uint32_t)i;
            nl += c == '\n';
        } else if ((c < 0x20 && c != '\r') || c >= 0x7f) {
            return -1;
        }
    }
    *lines = nl;
    return npos;
}

/* Compiled twice: with the POPCNT instruction (chosen at run time where the CPU has it: it
 * counts the bits of every mask) and without. */
#ifdef HAVE_SSE2
__attribute__((target("popcnt"))) static Py_ssize_t
index_popcnt(const char *p, Py_ssize_t n, uint32_t *pos, Py_ssize_t *lines)
{
    return index_impl(p, n, pos, lines);
}
static int use_popcnt;
#endif

static Py_ssize_t
index_block(const char *p, Py_ssize_t n, uint32_t *pos, Py_ssize_t *lines)
{
#ifdef HAVE_SSE2
    if (use_popcnt)
        return index_popcnt(p, n, pos, lines);
#endif
    return index_impl(p, n, pos, lines);
}

PyDoc_STRVAR(parse_doc,
"parse(block, kinds, units[, scratch]) -> (rows, gid, identities, ts, values) or (None, offset, why)\n\n"
"Parse a block of whole nvidia-smi CSV lines (', ' separated). kinds: one byte per field,\n"
"b'i' ignored, b't' identity text, b'n' number, b'm' mask, b's' timestamp; units: per field the\n"
"suffix cut from numbers (b' MiB') or b''. rows: lines read; gid: int32 identity number per\n"
"line; identities: a tuple of identity texts per number; ts: int64 microseconds (naive);\n"
"values: per number or mask field, (data, validity bitmap, null count) with float64 or int64\n"
"data. On anything it does not read exactly as the SQL cleaning would: (None, byte offset of\n"
"the line, reason). scratch: a writable buffer of at least 4 * (len(block) + 64) bytes the\n"
"parse may use (reused across calls, it saves fresh memory for every block).");

static PyObject *
parse(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_buffer buf, scratch = {0};
    const char *kinds;
    Py_ssize_t nf;
    PyObject *units;
    if (!PyArg_ParseTuple(args, "y*y#O!|w*", &buf, &kinds, &nf, &PyTuple_Type, &units, &scratch))
        return NULL;
    PyObject *result = NULL, *gid = NULL, *ts = NULL, *values = NULL, *idents = NULL;
    uint32_t *pos = NULL, *owned = NULL;
    Scan s;
    memset(&s, 0, sizeof s);
    s.nf = (int)nf;
    s.kinds = kinds;
    int nv = 0;
    if (nf < 1 || nf > MAX_FIELDS || PyTuple_GET_SIZE(units) != nf) {
        PyErr_SetString(PyExc_ValueError, "kinds and units must name the same 1..1024 fields");
        goto done;
    }
    for (int f = 0; f < nf; f++) {
        PyObject *u = PyTuple_GET_ITEM(units, f);
        if (!PyBytes_Check(u)) {
            PyErr_SetString(PyExc_TypeError, "units must be bytes");
            goto done;
        }
        s.unit[f] = PyBytes_AS_STRING(u);
        s.unit_len[f] = PyBytes_GET_SIZE(u);
        s.slot[f] = (kinds[f] == K_NUM || kinds[f] == K_MASK) ? nv++ : -1;
        if (kinds[f] == K_TEXT && ++s.nt > MAX_IDS) {
            PyErr_SetString(PyExc_ValueError, "at most 16 identity fields");
            goto done;
        }
    }
    const char *p = buf.buf;
    Py_ssize_t n = buf.len, rows = 0, npos = -1;
    if (n >= UINT32_MAX - 64) {
        PyErr_SetString(PyExc_ValueError, "a block must be under 4 GiB");
        goto done;
    }
    /* a caller's reused scratch spares faulting in fresh pages for every block */
    if (scratch.obj && (size_t)scratch.len >= ((size_t)n + 64) * sizeof *pos)
        pos = scratch.buf;
    else if (!(owned = malloc(((size_t)n + 64) * sizeof *pos)))  /* untouched pages cost nothing */
        goto nomem;
    else
        pos = owned;
    Py_BEGIN_ALLOW_THREADS
    npos = index_block(p, n, pos, &rows);
    Py_END_ALLOW_THREADS
    if (npos < 0) {
        result = Py_BuildValue("(Ons)", Py_None, (Py_ssize_t)0, "a byte that is not printable ASCII, or a lone CR");
        goto done;
    }
    rows += n && p[n - 1] != '\n';
    gid = PyBytes_FromStringAndSize(NULL, rows * 4);
    ts = PyBytes_FromStringAndSize(NULL, rows * 8);
    values = PyList_New(nv);
    s.data = PyMem_Calloc((size_t)nv + 1, sizeof *s.data);
    s.valid = PyMem_Calloc((size_t)nv + 1, sizeof *s.valid);
    s.nulls = PyMem_Calloc((size_t)nv + 1, sizeof *s.nulls);
    if (!gid || !ts || !values || !s.data || !s.valid || !s.nulls)
        goto nomem;
    for (int k = 0; k < nv; k++) {
        PyObject *d = PyBytes_FromStringAndSize(NULL, rows * 8), *v = PyBytes_FromStringAndSize(NULL, (rows + 7) / 8);
        if (!d || !v) {
            Py_XDECREF(d);
            Py_XDECREF(v);
            goto nomem;
        }
        s.data[k] = PyBytes_AS_STRING(d);
        s.valid[k] = (uint8_t *)PyBytes_AS_STRING(v);
        memset(s.valid[k], 0, (size_t)(rows + 7) / 8);
        PyList_SET_ITEM(values, k, PyTuple_Pack(2, d, v));
        Py_DECREF(d);
        Py_DECREF(v);
        if (!PyList_GET_ITEM(values, k))
            goto nomem;
    }
    s.gid = (int32_t *)PyBytes_AS_STRING(gid);
    s.ts = (int64_t *)PyBytes_AS_STRING(ts);
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    const char *q = p, *end = p + n;
    Py_ssize_t k = 0;
    for (Py_ssize_t r = 0; r < rows; r++) {
        if (line(&s, p, end, pos, npos, &k, q, r) < 0) {
            failed = 1;
            break;
        }
        q = p + (k <= npos ? pos[k - 1] : n) + 1;
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        result = Py_BuildValue("(Ons)", Py_None, s.where, s.why);
        goto done;
    }
    idents = PyList_New(s.n_ids);
    if (!idents)
        goto nomem;
    for (int i = 0; i < s.n_ids; i++) {
        PyObject *tup = PyTuple_New(s.nt);
        if (!tup)
            goto nomem;
        PyList_SET_ITEM(idents, i, tup);
        for (int j = 0; j < s.nt; j++) {
            PyObject *str = PyUnicode_DecodeASCII(s.ids[i].at[j], s.ids[i].len[j], "strict");
            if (!str)
                goto done;
            PyTuple_SET_ITEM(tup, j, str);
        }
    }
    for (int k = 0; k < nv; k++) {
        PyObject *pair = PyList_GET_ITEM(values, k), *nulls = PyLong_FromSsize_t(s.nulls[k]);
        PyObject *triple = nulls ? PyTuple_Pack(3, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1), nulls) : NULL;
        Py_XDECREF(nulls);
        if (!triple)
            goto done;
        PyList_SetItem(values, k, triple);
    }
    result = Py_BuildValue("(nOOOO)", rows, gid, idents, ts, values);
    goto done;
nomem:
    if (!PyErr_Occurred())
        PyErr_NoMemory();
done:
    Py_XDECREF(gid);
    Py_XDECREF(ts);
    Py_XDECREF(values);
    Py_XDECREF(idents);
    PyMem_Free(s.data);
    PyMem_Free(s.valid);
    PyMem_Free(s.nulls);
    free(s.ids);
    free(s.table);
    free(owned);
    if (scratch.obj)
        PyBuffer_Release(&scratch);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"parse", parse, METH_VARARGS, parse_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_smiscan",
    "Native reader for clean nvidia-smi CSV blocks (see pipeline.ingest.smi_native).", -1, methods,
};

PyMODINIT_FUNC
PyInit__smiscan(void)
{
#ifdef HAVE_SSE2
    __builtin_cpu_init();
    use_popcnt = __builtin_cpu_supports("popcnt");
#endif
    return PyModule_Create(&module);
}
