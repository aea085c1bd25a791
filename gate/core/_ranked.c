/* gate.core._native, part two: a results file of ranked ids read in C (gate.targets.results).
 *
 * scan_ranked(raw) reads, without the GIL, a results file whose every line is of the plain shape
 *     {"id": str|null, "question": str|null, "answer": str|null, "latency_ms": number|null,
 *      "retrieved": [{"id": str, "text": str|null, "score": number|null}, ...]}
 * (keys in any order, each at most once; "retrieved" and each passage's "id" present), the passages' texts checked
 * and skipped. It gives a capsule of what it read, or None for a file it does not take: any other key or value type, a
 * raw control character or a bad escape in a string, an escaped key, a lone surrogate escape, an empty passage id, a
 * score at or beyond +-1e300, an integer too long for a C long long, a CR, a byte after a line's closing brace. Such
 * a file is decoded by msgspec, which says what is wrong with it.
 *
 * build_ranked(scanned, line_cls, passage_cls, decode) makes the rows msgspec's decode_lines gives for that file
 * (line_cls(retrieved, id, question, answer, None, latency_ms) of passage_cls(id, score)): numbers parsed to the same
 * double (a decimal of at most 15 digits and a power of ten up to 22 by one rounded operation, exact; any other by
 * PyOS_string_to_double, correctly rounded as msgspec's is), strings with an escape decoded by ``decode`` (msgspec);
 * None if a value then proves out of range. Equal ids share one str. tests/unit/test_ranked_scan.py holds the two to it.
 *
 * ranked_outputs(...) makes, from the same scan, the outputs read_results would make of those rows when every line
 * is of the plain kind (an id of a golden case, once, a latency in range), straight into their slots; None otherwise.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#endif

enum { S_NONE, S_ASCII, S_UTF8, S_ESCAPED }; /* a string's kind: null or absent, plain ASCII, plain UTF-8, escaped */
enum { N_NONE, N_DOUBLE, N_INT, N_SLOW };   /* a number's: null or absent, a double, an int, a span to parse */

typedef struct {
    Py_ssize_t off, len; /* the string without its quotes; S_ESCAPED: with them */
    int kind;
} Str;

typedef struct {
    double v;
    long long i;
    Py_ssize_t off, len;
    int kind;
} Num;

typedef struct {
    Str id;        /* S_ESCAPED (or too long to keep): its span in the file */
    Py_ssize_t uid; /* else: its index in Scan.ids, one for equal ids (-1: none; PENDING: not looked up yet) */
    uint64_t hash; /* of the id's bytes (PENDING) */
    Num score;
} Passage;

#define PENDING (-2)

typedef struct {
    uint64_t hash;
    size_t off; /* in Scan.arena */
    Py_ssize_t len;
    int kind;
    int clean; /* ASCII, no capital, no space at either end: its fold (strip, casefold) is itself (near_ids) */
} Id;

typedef struct {
    Str id, question, answer;
    Num latency;
    Py_ssize_t first, count; /* its passages */
} Line;

typedef struct { /* 16 bytes, four to a cache line: what the id's lookup reads, where it does not read Scan.ids */
    uint32_t tag;   /* the hash's upper half */
    uint32_t index; /* 1 + the id's index in Scan.ids (0: empty) */
    uint32_t len, off; /* the id's bytes in Scan.arena */
} Slot;

typedef struct {
    Py_buffer view;
    Line *lines;
    Passage *ps;
    Py_ssize_t nlines, ncap, np, pcap;
    Id *ids;               /* the distinct passage ids (not escaped), their bytes copied into arena while the scan */
    unsigned char *arena;  /* has them in cache: the rows are then made from a few hot kilobytes, not from the file */
    Slot *table;           /* open addressing: an id's hash and 1 + its index in ids (0: empty) */
    size_t nids, idcap, alen, acap, mask;
} Scan;

typedef struct {
    const unsigned char *b, *p, *end;
    Scan *s;
    int nomem;
} Cur;

static void ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *u) {
    unsigned v = 0;
    if (end - p < 4)
        return 0;
    for (int i = 0; i < 4; i++) {
        unsigned char h = p[i];
        unsigned d = h >= '0' && h <= '9' ? (unsigned)(h - '0') : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                   : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10) : 16u;
        if (d == 16)
            return 0;
        v = v * 16 + d;
    }
    *u = v;
    return 1;
}

/* An escape at c->p (the backslash): valid (a surrogate only as a high-low pair) and passed. */
static int escape(Cur *c) {
    unsigned u, lo;
    unsigned char e;
    if (c->end - c->p < 2)
        return 0;
    e = c->p[1];
    if (e != 'u') {
        c->p += 2;
        return e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't';
    }
    if (!hex4(c->p + 2, c->end, &u))
        return 0;
    c->p += 6;
    if (u < 0xD800 || u > 0xDFFF)
        return 1;
    if (u > 0xDBFF || c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u' || !hex4(c->p + 2, c->end, &lo) ||
        lo < 0xDC00 || lo > 0xDFFF)
        return 0;
    c->p += 6;
    return 1;
}

/* The first byte from p on that is a quote, a backslash, a control character or not ASCII; end if none. */
static const unsigned char *special(const unsigned char *p, const unsigned char *end) {
#if defined(__SSE2__) && defined(__GNUC__)
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        /* signed: a byte from 0x80 on is below 0x20 too */
        int mask = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)),
                                                  _mm_cmplt_epi8(v, space)));
        if (mask)
            return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80)
        p++;
    return p;
}

/* The length of the UTF-8 sequence at p (its first byte not ASCII), or 0 if it is not valid UTF-8 (as
 * bytes.decode("utf-8") takes it: no surrogates, no overlong forms). */
static int utf8_at(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    Py_ssize_t left = end - p;
    if (c >= 0xC2 && c <= 0xDF)
        return left >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return left >= 3 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        return left >= 4 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80 ? 4 : 0;
    }
    return 0;
}

static uint64_t hash_bytes(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n, w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, p, (size_t)n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

/* A string at c->p (its opening quote) read into *out (NULL: checked and skipped). */
static int string(Cur *c, Str *out) {
    const unsigned char *start = ++c->p;
    int escaped = 0, wide = 0;
    for (;;) {
        unsigned char ch;
        c->p = special(c->p, c->end);
        if (c->p >= c->end)
            return 0;
        ch = *c->p;
        if (ch == '"')
            break;
        if (ch == '\\') {
            escaped = 1;
            if (!escape(c))
                return 0;
        } else if (ch >= 0x80) {
            int n = utf8_at(c->p, c->end);
            if (n == 0)
                return 0;
            wide = 1;
            c->p += n;
        } else {
            return 0; /* a control character */
        }
    }
    c->p++; /* the closing quote */
    if (out != NULL) {
        out->off = escaped ? start - 1 - c->b : start - c->b;
        out->len = escaped ? c->p - start + 1 : c->p - 1 - start;
        out->kind = escaped ? S_ESCAPED : wide ? S_UTF8 : S_ASCII;
    }
    return 1;
}

static int literal(Cur *c, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return 0;
    c->p += n;
    return 1;
}

static int string_or_null(Cur *c, Str *out) {
    if (c->p < c->end && *c->p == '"')
        return string(c, out);
    if (out != NULL)
        out->kind = S_NONE;
    return literal(c, "null");
}

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A JSON number (or null) at c->p into *out: an integer literal N_INT (at most 18 digits), else N_DOUBLE when one
 * rounded operation gives it, else N_SLOW (its span, parsed with the GIL). */
static int number(Cur *c, Num *out) {
    const unsigned char *start = c->p;
    int neg = 0, digits = 0, frac = 0, is_float = 0, lead = 1;
    uint64_t m = 0;
    long exp = 0;
    if (c->p < c->end && *c->p == 'n') {
        out->kind = N_NONE;
        return literal(c, "null");
    }
    if (c->p < c->end && *c->p == '-') {
        neg = 1;
        c->p++;
    }
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return 0;
    if (*c->p == '0' && c->p + 1 < c->end && c->p[1] >= '0' && c->p[1] <= '9')
        return 0; /* a leading zero */
    for (; c->p < c->end && *c->p >= '0' && *c->p <= '9'; c->p++) {
        if (lead && *c->p == '0')
            continue;
        lead = 0;
        if (++digits <= 19)
            m = m * 10 + (uint64_t)(*c->p - '0');
    }
    if (c->p < c->end && *c->p == '.') {
        is_float = 1;
        c->p++;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return 0;
        for (; c->p < c->end && *c->p >= '0' && *c->p <= '9'; c->p++) {
            frac++;
            if (lead && *c->p == '0')
                continue;
            lead = 0;
            if (++digits <= 19)
                m = m * 10 + (uint64_t)(*c->p - '0');
        }
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        int eneg = 0, edigits = 0;
        is_float = 1;
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
            eneg = *c->p++ == '-';
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return 0;
        for (; c->p < c->end && *c->p >= '0' && *c->p <= '9'; c->p++)
            if (++edigits <= 6)
                exp = exp * 10 + (*c->p - '0');
        if (edigits > 6)
            exp = 10000000;
        if (eneg)
            exp = -exp;
    }
    out->off = start - c->b;
    out->len = c->p - start;
    if (!is_float) {
        if (digits > 18)
            return 0;
        out->kind = N_INT;
        out->i = neg ? -(long long)m : (long long)m;
        return 1;
    }
    out->kind = N_SLOW;
#if FLT_EVAL_METHOD == 0
    {
        long e10 = exp - frac;
        if (digits <= 15 && e10 >= -22 && e10 <= 22) {
            double v = e10 >= 0 ? (double)m * POW10[e10] : (double)m / POW10[-e10]; /* m < 2^53: exact doubles */
            out->v = neg ? -v : v;
            out->kind = N_DOUBLE;
        }
    }
#endif
    return 1;
}

/* A key at c->p and its colon: the index of its name in names (n of them), or -1 (not one of them, or escaped). */
static int key(Cur *c, const char *const *names, int n) {
    const unsigned char *k, *e;
    size_t len;
    if (c->p >= c->end || *c->p != '"')
        return -1;
    k = c->p + 1;
    e = special(k, c->end);
    if (e >= c->end || *e != '"')
        return -1;
    len = (size_t)(e - k);
    c->p = e + 1;
    ws(c);
    if (c->p >= c->end || *c->p != ':')
        return -1;
    c->p++;
    ws(c);
    for (int i = 0; i < n; i++) {
        const char *name = names[i];
        size_t j = 0;
        while (j < len && name[j] == (char)k[j])
            j++;
        if (j == len && name[j] == '\0')
            return i;
    }
    return -1;
}

/* An object at c->p, each member's value read by member(c, which, into): 1 read, 0 not taken. */
static int object(Cur *c, const char *const *names, int n, int (*member)(Cur *, int, void *), void *into, int *seen) {
    *seen = 0;
    if (c->p >= c->end || *c->p != '{')
        return 0;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 1;
    }
    for (;;) {
        int which = key(c, names, n);
        if (which < 0 || (*seen & (1 << which)) || !member(c, which, into))
            return 0;
        *seen |= 1 << which;
        ws(c);
        if (c->p >= c->end)
            return 0;
        if (*c->p == '}') {
            c->p++;
            return 1;
        }
        if (*c->p != ',')
            return 0;
        c->p++;
        ws(c);
    }
}

static const char *const PASSAGE_KEYS[] = {"id", "text", "score"};
static const char *const LINE_KEYS[] = {"id", "question", "answer", "latency_ms", "retrieved"};

static int grow_table(Scan *s) {
    size_t size = s->mask ? (s->mask + 1) * 2 : 4096;
    Slot *table = PyMem_RawCalloc(size, sizeof(Slot));
    if (table == NULL)
        return 0;
    for (size_t i = 0; i < s->nids; i++) {
        size_t j = (size_t)s->ids[i].hash & (size - 1);
        while (table[j].index)
            j = (j + 1) & (size - 1);
        table[j] = (Slot){(uint32_t)(s->ids[i].hash >> 32), (uint32_t)i + 1, (uint32_t)s->ids[i].len, (uint32_t)s->ids[i].off};
    }
    PyMem_RawFree(s->table);
    s->table = table;
    s->mask = size - 1;
    return 1;
}

int ascii_folds_to_itself(const unsigned char *p, Py_ssize_t n); /* _native.c: what near_ids' clean_id reads */

/* Whether a[0..n) and b[0..n) hold the same bytes (n is an id's length: a few words, compared inline). */
static int same_bytes(const unsigned char *a, const unsigned char *b, size_t n) {
    uint64_t x, y;
    for (; n >= 8; a += 8, b += 8, n -= 8) {
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
    }
    while (n--)
        if (*a++ != *b++)
            return 0;
    return 1;
}

/* The index in s->ids of the plain id at b[x->off..] whose hash is h: found, or added. -1: out of memory; -2: not
 * kept (the ids' bytes would pass 4 GB: it is then made from the file, as an escaped one). */
static Py_ssize_t intern_id(Scan *s, const unsigned char *b, const Str *x, uint64_t h) {
    const unsigned char *bytes = b + x->off;
    uint32_t tag = (uint32_t)(h >> 32);
    size_t j;
    if (x->len > (Py_ssize_t)(UINT32_MAX - s->alen) || s->nids >= UINT32_MAX - 1)
        return -2;
    if ((s->nids + 1) * 2 > s->mask + 1 && !grow_table(s))
        return -1;
    for (j = (size_t)h & s->mask; s->table[j].index; j = (j + 1) & s->mask) {
        const Slot *e = &s->table[j];
        if (e->tag == tag && e->len == (uint32_t)x->len && same_bytes(s->arena + e->off, bytes, (size_t)x->len))
            return (Py_ssize_t)e->index - 1;
    }
    if (s->nids == s->idcap) {
        size_t cap = s->idcap ? s->idcap * 2 : 1024;
        Id *grown = PyMem_RawRealloc(s->ids, cap * sizeof(Id));
        if (grown == NULL)
            return -1;
        s->ids = grown;
        s->idcap = cap;
    }
    if (s->alen + (size_t)x->len > s->acap) {
        size_t cap = s->acap ? s->acap * 2 : 65536;
        while (cap < s->alen + (size_t)x->len)
            cap *= 2;
        unsigned char *grown = PyMem_RawRealloc(s->arena, cap);
        if (grown == NULL)
            return -1;
        s->arena = grown;
        s->acap = cap;
    }
    memcpy(s->arena + s->alen, bytes, (size_t)x->len);
    s->ids[s->nids] = (Id){h, s->alen, x->len, x->kind, x->kind == S_ASCII && ascii_folds_to_itself(bytes, x->len)};
    s->table[j] = (Slot){tag, (uint32_t)s->nids + 1, (uint32_t)x->len, (uint32_t)s->alen};
    s->alen += (size_t)x->len;
    return (Py_ssize_t)s->nids++;
}

static int passage_member(Cur *c, int which, void *into) {
    Passage *d = into;
    if (which == 0) {
        if (c->p >= c->end || *c->p != '"' || !string(c, &d->id) || d->id.len == 0)
            return 0;
        d->uid = -1;
        if (d->id.kind != S_ESCAPED) { /* looked up once the passage is read: its slot fetched meanwhile */
            d->hash = hash_bytes(c->b + d->id.off, d->id.len);
            d->uid = PENDING;
#if defined(__GNUC__)
            if (c->s->table != NULL)
                __builtin_prefetch(&c->s->table[(size_t)d->hash & c->s->mask]);
#endif
        }
        return 1;
    }
    if (which == 1)
        return string_or_null(c, NULL);
    return number(c, &d->score);
}

static int passages(Cur *c, Line *line) {
    Scan *s = c->s;
    line->first = s->np;
    if (c->p >= c->end || *c->p != '[')
        return 0;
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        return 1;
    }
    for (;;) {
        Passage d;
        int seen;
        d.score.kind = N_NONE;
        if (!object(c, PASSAGE_KEYS, 3, passage_member, &d, &seen) || !(seen & 1))
            return 0;
        if (d.uid == PENDING && (d.uid = intern_id(s, c->b, &d.id, d.hash)) < 0) {
            if (d.uid == -1) {
                c->nomem = 1;
                return 0;
            }
            d.uid = -1;
        }
        if (s->np == s->pcap) {
            Py_ssize_t cap = s->pcap ? s->pcap * 2 : 4096;
            Passage *grown = PyMem_RawRealloc(s->ps, (size_t)cap * sizeof(Passage));
            if (grown == NULL) {
                c->nomem = 1;
                return 0;
            }
            s->ps = grown;
            s->pcap = cap;
        }
        s->ps[s->np++] = d;
        line->count++;
        ws(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return 1;
        }
        if (c->p >= c->end || *c->p != ',')
            return 0;
        c->p++;
        ws(c);
    }
}

static int line_member(Cur *c, int which, void *into) {
    Line *line = into;
    switch (which) {
    case 0: return string_or_null(c, &line->id);
    case 1: return string_or_null(c, &line->question);
    case 2: return string_or_null(c, &line->answer);
    case 3: return number(c, &line->latency);
    default: return passages(c, line);
    }
}

/* Every line of b[0..n): 1 all taken, 0 not (or out of memory: c.nomem). */
static int scan_all(Scan *s, const unsigned char *b, Py_ssize_t n) {
    Cur c = {b, b, b + n, s, 0};
    while (c.p < c.end) {
        Line line;
        int seen;
        memset(&line, 0, sizeof line);
        if (s->nlines == s->ncap) {
            Py_ssize_t cap = s->ncap ? s->ncap * 2 : 1024;
            Line *grown = PyMem_RawRealloc(s->lines, (size_t)cap * sizeof(Line));
            if (grown == NULL)
                return -1;
            s->lines = grown;
            s->ncap = cap;
        }
        if (!object(&c, LINE_KEYS, 5, line_member, &line, &seen) || !(seen & 16))
            return c.nomem ? -1 : 0;
        if (c.p < c.end && *c.p++ != '\n')
            return 0;
        s->lines[s->nlines++] = line;
    }
    return 1;
}

static void scan_free(PyObject *capsule) {
    Scan *s = PyCapsule_GetPointer(capsule, "gate.core._native.Scan");
    if (s == NULL)
        return;
    PyBuffer_Release(&s->view);
    PyMem_RawFree(s->lines);
    PyMem_RawFree(s->ps);
    PyMem_RawFree(s->ids);
    PyMem_RawFree(s->arena);
    PyMem_RawFree(s->table);
    PyMem_RawFree(s);
}

PyObject *scan_ranked(PyObject *self, PyObject *arg) {
    Scan *s;
    PyObject *capsule;
    int ok;
    (void)self;
    if ((s = PyMem_RawCalloc(1, sizeof(Scan))) == NULL)
        return PyErr_NoMemory();
    if (PyObject_GetBuffer(arg, &s->view, PyBUF_SIMPLE) < 0) {
        PyMem_RawFree(s);
        return NULL;
    }
    if ((capsule = PyCapsule_New(s, "gate.core._native.Scan", scan_free)) == NULL) {
        PyBuffer_Release(&s->view);
        PyMem_RawFree(s);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    ok = scan_all(s, s->view.buf, s->view.len);
    Py_END_ALLOW_THREADS
    if (ok == 1)
        return capsule;
    Py_DECREF(capsule);
    if (ok < 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* ---- the rows, with the GIL ---- */

typedef struct {
    Scan *s;
    PyObject *decode, **strs; /* strs[i]: the str of s->ids[i], made at its first use */
    int out_of_range;
} Build;

static PyObject *plain(const unsigned char *p, const Str *x) {
    if (x->kind == S_ASCII) {
        PyObject *u = PyUnicode_New(x->len, 127);
        if (u != NULL)
            memcpy(PyUnicode_DATA(u), p + x->off, (size_t)x->len);
        return u;
    }
    return PyUnicode_DecodeUTF8((const char *)p + x->off, x->len, "strict");
}

/* A string value: None, a new str, msgspec's decoding of an escaped one. */
static PyObject *text_of(Build *bd, const Str *x) {
    const unsigned char *p = bd->s->view.buf;
    if (x->kind == S_NONE)
        Py_RETURN_NONE;
    if (x->kind != S_ESCAPED)
        return plain(p, x);
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p + x->off, x->len), *u;
    if (raw == NULL)
        return NULL;
    u = PyObject_CallOneArg(bd->decode, raw);
    Py_DECREF(raw);
    if (u != NULL && !PyUnicode_CheckExact(u)) {
        Py_DECREF(u);
        PyErr_SetString(PyExc_TypeError, "decode gave no str");
        return NULL;
    }
    return u;
}

/* A passage's id: one str for equal ids (a new reference). */
static PyObject *shared_id(Build *bd, const Passage *d) {
    PyObject *u;
    if (d->uid < 0)
        return text_of(bd, &d->id);
    u = bd->strs[d->uid];
    if (u == NULL) {
        const Id *e = &bd->s->ids[d->uid];
        Str x = {(Py_ssize_t)e->off, e->len, e->kind};
        if ((u = plain(bd->s->arena, &x)) == NULL)
            return NULL;
        bd->strs[d->uid] = u;
    }
    Py_INCREF(u);
    return u;
}

/* A number's double (not None; an int as a double): 0, or -1 and an error. */
static int double_of(Build *bd, const Num *x, double *v) {
    if (x->kind == N_INT)
        *v = (double)x->i;
    else if (x->kind == N_DOUBLE)
        *v = x->v;
    else {
        char buf[64], *end;
        char *text = x->len < 64 ? buf : PyMem_Malloc((size_t)x->len + 1);
        if (text == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(text, (const char *)bd->s->view.buf + x->off, (size_t)x->len);
        text[x->len] = '\0';
        *v = PyOS_string_to_double(text, &end, NULL);
        if (text != buf)
            PyMem_Free(text);
        if (*v == -1.0 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* A number: None, an int, a float (out_of_range set, and None given, for a score at or beyond +-1e300 or another
 * number that is not finite). */
static PyObject *number_of(Build *bd, const Num *x, int score) {
    double v;
    if (x->kind == N_NONE)
        Py_RETURN_NONE;
    if (x->kind == N_INT && !score)
        return PyLong_FromLongLong(x->i);
    if (double_of(bd, x, &v) < 0)
        return NULL;
    if (score ? !(v > -1e300 && v < 1e300) : !isfinite(v)) {
        bd->out_of_range = 1;
        Py_RETURN_NONE;
    }
    return PyFloat_FromDouble(v);
}

static PyObject *passage_list(Build *bd, const Line *line, PyObject *passage_cls) {
    PyObject *list = PyList_New(line->count);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < line->count; i++) {
        Passage *d = &bd->s->ps[line->first + i];
        PyObject *args[2] = {shared_id(bd, d), NULL}, *obj = NULL;
        if (args[0] != NULL && (args[1] = number_of(bd, &d->score, 1)) != NULL)
            obj = PyObject_Vectorcall(passage_cls, args, 2, NULL);
        Py_XDECREF(args[0]);
        Py_XDECREF(args[1]);
        if (obj == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, obj);
    }
    return list;
}

static PyObject *row_of(Build *bd, const Line *line, PyObject *line_cls, PyObject *passage_cls) {
    PyObject *args[6] = {NULL, NULL, NULL, NULL, Py_None, NULL}, *row = NULL;
    Py_INCREF(Py_None);
    if ((args[0] = passage_list(bd, line, passage_cls)) != NULL && (args[1] = text_of(bd, &line->id)) != NULL &&
        (args[2] = text_of(bd, &line->question)) != NULL && (args[3] = text_of(bd, &line->answer)) != NULL &&
        (args[5] = number_of(bd, &line->latency, 0)) != NULL)
        row = PyObject_Vectorcall(line_cls, args, 6, NULL);
    for (int i = 0; i < 6; i++)
        Py_XDECREF(args[i]);
    return row;
}

/* A Build of the scan in capsule (-1 and an error: not a scan, or no memory); build_close frees what it made. */
static int build_open(Build *bd, PyObject *capsule, PyObject *decode) {
    memset(bd, 0, sizeof *bd);
    if ((bd->s = PyCapsule_GetPointer(capsule, "gate.core._native.Scan")) == NULL)
        return -1;
    bd->decode = decode;
    if ((bd->strs = PyMem_Calloc(bd->s->nids + 1, sizeof(PyObject *))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void build_close(Build *bd) {
    for (size_t j = 0; j < bd->s->nids; j++)
        Py_XDECREF(bd->strs[j]);
    PyMem_Free(bd->strs);
}

PyObject *build_ranked(PyObject *self, PyObject *args) {
    PyObject *capsule, *line_cls, *passage_cls, *decode, *rows;
    Build bd;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &capsule, &line_cls, &passage_cls, &decode))
        return NULL;
    if (build_open(&bd, capsule, decode) < 0)
        return NULL;
    if ((rows = PyList_New(bd.s->nlines)) == NULL) {
        build_close(&bd);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < bd.s->nlines; i++) {
        PyObject *row = row_of(&bd, &bd.s->lines[i], line_cls, passage_cls);
        if (row == NULL || bd.out_of_range) {
            Py_XDECREF(row);
            Py_CLEAR(rows);
            break;
        }
        PyList_SET_ITEM(rows, i, row);
    }
    build_close(&bd);
    if (rows == NULL && bd.out_of_range && !PyErr_Occurred())
        Py_RETURN_NONE;
    if (rows == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) { /* msgspec refused an escaped string */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return rows;
}

/* ---- RankedPassages: an output's ranked passages, each made when it is first asked for ---- */

/* A results file of 10,000 cases x 20 passages would make 200,000 passage objects (and their scores' floats) that a
 * retrieval run never reads one by one: its loops in C read the ids and the scores as they are kept here (ranked_ids,
 * ranked_unsorted). Read from Python it is a sequence of passage_cls(id, score), each made once (the same object
 * every time it is asked for); a slice is a list of them; it equals a list of equal passages; it pickles as that list. */

typedef union {
    PyObject *o;
    double d; /* a score; NaN: None (a score is never NaN: out_of_range) */
} Cell;

typedef struct {
    PyObject_VAR_HEAD
    Py_ssize_t n;
    int clean; /* every id folds to itself (Id.clean): near_ids need not fold them */
    PyObject *cls;
    PyObject **made; /* the passages made (n, each NULL until made; the array itself made with the first) */
    Cell cells[1];   /* the ids (n, new references), then the scores (n): 16 bytes a passage, in one block */
} Ranked;

static PyTypeObject RankedType;

int ranked_check(PyObject *o) { return Py_IS_TYPE(o, &RankedType); }

/* The number of passages of a RankedPassages, and the id of its i-th (borrowed; 0 <= i < its length). */
Py_ssize_t ranked_length_of(PyObject *o) { return ((Ranked *)o)->n; }
PyObject *ranked_id_at(PyObject *o, Py_ssize_t i) { return ((Ranked *)o)->cells[i].o; }

/* Whether o is a RankedPassages whose every id folds to itself (strip, casefold). */
int ranked_clean(PyObject *o) { return ranked_check(o) && ((Ranked *)o)->clean; }

static PyObject *ranked_item(PyObject *self, Py_ssize_t i) {
    Ranked *r = (Ranked *)self;
    PyObject **made;
    if (i < 0 || i >= r->n) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return NULL;
    }
    if (r->made == NULL && (r->made = PyMem_Calloc((size_t)r->n, sizeof(PyObject *))) == NULL)
        return PyErr_NoMemory();
    made = &r->made[i];
    if (*made == NULL) {
        double v = r->cells[r->n + i].d;
        PyObject *score = isnan(v) ? (Py_INCREF(Py_None), Py_None) : PyFloat_FromDouble(v), *args[2], *obj;
        if (score == NULL)
            return NULL;
        args[0] = r->cells[i].o;
        args[1] = score;
        obj = PyObject_Vectorcall(r->cls, args, 2, NULL);
        Py_DECREF(score);
        if (obj == NULL)
            return NULL;
        *made = obj;
    }
    Py_INCREF(*made);
    return *made;
}

static Py_ssize_t ranked_length(PyObject *self) { return ((Ranked *)self)->n; }

/* The passages as a new list (start, stop, step as a slice gives them). */
static PyObject *ranked_slice(PyObject *self, Py_ssize_t start, Py_ssize_t step, Py_ssize_t count) {
    PyObject *list = PyList_New(count);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *item = ranked_item(self, start + k * step);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, k, item);
    }
    return list;
}

static PyObject *ranked_list(PyObject *self) { return ranked_slice(self, 0, 1, ((Ranked *)self)->n); }

static PyObject *ranked_subscript(PyObject *self, PyObject *key) {
    Ranked *r = (Ranked *)self;
    if (PyIndex_Check(key)) {
        Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (i == -1 && PyErr_Occurred())
            return NULL;
        return ranked_item(self, i < 0 ? i + r->n : i);
    }
    if (PySlice_Check(key)) {
        Py_ssize_t start, stop, step, count;
        if (PySlice_Unpack(key, &start, &stop, &step) < 0)
            return NULL;
        count = PySlice_AdjustIndices(r->n, &start, &stop, step);
        return ranked_slice(self, start, step, count);
    }
    PyErr_Format(PyExc_TypeError, "list indices must be integers or slices, not %.200s", Py_TYPE(key)->tp_name);
    return NULL;
}

static PyObject *ranked_richcompare(PyObject *self, PyObject *other, int op) {
    PyObject *mine, *theirs, *got;
    if ((op != Py_EQ && op != Py_NE) || !(ranked_check(other) || PyList_Check(other)))
        Py_RETURN_NOTIMPLEMENTED;
    if ((mine = ranked_list(self)) == NULL)
        return NULL;
    theirs = ranked_check(other) ? ranked_list(other) : (Py_INCREF(other), other);
    got = theirs == NULL ? NULL : PyObject_RichCompare(mine, theirs, op);
    Py_DECREF(mine);
    Py_XDECREF(theirs);
    return got;
}

static PyObject *ranked_repr(PyObject *self) {
    PyObject *list = ranked_list(self), *text;
    if (list == NULL)
        return NULL;
    text = PyObject_Repr(list);
    Py_DECREF(list);
    return text;
}

static PyObject *ranked_reduce(PyObject *self, PyObject *unused) {
    (void)unused;
    return Py_BuildValue("(O(N))", (PyObject *)&PyList_Type, ranked_list(self));
}

static void ranked_dealloc(PyObject *self) {
    Ranked *r = (Ranked *)self;
    for (Py_ssize_t i = 0; i < r->n; i++) {
        Py_XDECREF(r->cells[i].o);
        if (r->made != NULL)
            Py_XDECREF(r->made[i]);
    }
    PyMem_Free(r->made);
    Py_XDECREF(r->cls);
    Py_TYPE(self)->tp_free(self);
}

static PySequenceMethods ranked_as_sequence = {.sq_length = ranked_length, .sq_item = ranked_item};
static PyMappingMethods ranked_as_mapping = {.mp_length = ranked_length, .mp_subscript = ranked_subscript};
static PyMethodDef ranked_methods[] = {
    {"__reduce__", ranked_reduce, METH_NOARGS, "Pickled as the list of its passages."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RankedType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gate.core._native.RankedPassages",
    .tp_basicsize = offsetof(Ranked, cells),
    .tp_itemsize = sizeof(Cell),
    .tp_dealloc = ranked_dealloc,
    .tp_repr = ranked_repr,
    .tp_as_sequence = &ranked_as_sequence,
    .tp_as_mapping = &ranked_as_mapping,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_SEQUENCE,
    .tp_doc = "A results line's ranked passages, each made (passage_cls(id, score)) when it is first asked for.",
    .tp_richcompare = ranked_richcompare,
    .tp_iter = PySeqIter_New,
    .tp_methods = ranked_methods,
};

int ranked_ready(PyObject *module) {
    if (PyType_Ready(&RankedType) < 0)
        return -1;
    Py_INCREF(&RankedType);
    if (PyModule_AddObject(module, "RankedPassages", (PyObject *)&RankedType) < 0) {
        Py_DECREF(&RankedType);
        return -1;
    }
    return 0;
}

/* The ids of the first upto passages (all: upto < 0), as a new list. */
PyObject *ranked_ids(PyObject *self, Py_ssize_t upto) {
    Ranked *r = (Ranked *)self;
    Py_ssize_t n = upto >= 0 && upto < r->n ? upto : r->n;
    PyObject *ids = PyList_New(n);
    if (ids != NULL)
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_INCREF(r->cells[i].o);
            PyList_SET_ITEM(ids, i, r->cells[i].o);
        }
    return ids;
}

/* Whether the scores given (not None) are out of descending order. */
int ranked_unsorted(PyObject *self) {
    Ranked *r = (Ranked *)self;
    const Cell *scores = r->cells + r->n;
    int have = 0;
    double prev = 0.0;
    for (Py_ssize_t i = 0; i < r->n; i++) {
        if (isnan(scores[i].d))
            continue;
        if (have && prev < scores[i].d)
            return 1;
        prev = scores[i].d;
        have = 1;
    }
    return 0;
}

/* A line's passages as a RankedPassages of passage_cls (out_of_range set for a score out of range). */
static PyObject *ranked_of(Build *bd, const Line *line, PyObject *passage_cls) {
    Py_ssize_t n = line->count;
    Ranked *r = PyObject_NewVar(Ranked, &RankedType, 2 * n);
    if (r == NULL)
        return NULL;
    r->n = n;
    r->clean = 1;
    Py_INCREF(passage_cls);
    r->cls = passage_cls;
    r->made = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        r->cells[i].o = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Passage *d = &bd->s->ps[line->first + i];
        double v = NAN;
        r->clean = r->clean && d->uid >= 0 && bd->s->ids[d->uid].clean;
        if ((r->cells[i].o = shared_id(bd, d)) == NULL || (d->score.kind != N_NONE && double_of(bd, &d->score, &v) < 0)) {
            Py_DECREF(r);
            return NULL;
        }
        if (!(isnan(v) || (v > -1e300 && v < 1e300))) {
            bd->out_of_range = 1;
            v = NAN;
        }
        r->cells[n + i].d = v;
    }
    return (PyObject *)r;
}

PyObject *build_slots(PyTypeObject *cls, PyObject *slots, PyObject *const *values, Py_ssize_t n); /* _native.c */

/* One line's output, added to outputs: 1 added, 0 the line is not of the kind taken (no id, an id not in known, a
 * second line of a case, a latency out of range), -1 on error. */
static int output_of(Build *bd, const Line *line, PyObject **ctx, double max_latency, PyObject *outputs) {
    PyObject *passage_cls = ctx[0], *known = ctx[1], *out_cls = ctx[2], *out_slots = ctx[3], *rest = ctx[4];
    PyObject *cid = NULL, *values[16] = {NULL}, *out = NULL;
    Py_ssize_t nrest = PyTuple_GET_SIZE(rest), n = 5 + nrest;
    int rc = -1, in;
    if (line->id.kind == S_NONE) /* matched by its question: read_results' own loop */
        return 0;
    if (n > 16 || PyTuple_GET_SIZE(out_slots) != n) { /* TypeError: not taken for a string msgspec refused */
        PyErr_SetString(PyExc_TypeError, "out_slots must hold the five fields given and the rest, at most 16");
        return -1;
    }
    if ((cid = text_of(bd, &line->id)) == NULL)
        goto done;
    if (PyDict_Check(known)) { /* case id -> the case's own str: the output keyed (and named) by it, one str for both */
        PyObject *own = PyDict_GetItemWithError(known, cid);
        if ((in = own != NULL) != 0) {
            Py_INCREF(own);
            Py_SETREF(cid, own);
        } else if (PyErr_Occurred())
            goto done;
    } else if ((in = PySet_Contains(known, cid)) < 0)
        goto done;
    if (!in || (in = PyDict_Contains(outputs, cid)) != 0) { /* not a golden case's, or a second line: said there */
        rc = in < 0 ? -1 : 0;
        goto done;
    }
    if ((values[4] = number_of(bd, &line->latency, 0)) == NULL)
        goto done;
    if (bd->out_of_range || (values[4] != Py_None && !(PyFloat_Check(values[4]) ? PyFloat_AS_DOUBLE(values[4]) >= 0
                                                         && PyFloat_AS_DOUBLE(values[4]) <= max_latency
                                                       : line->latency.i >= 0 && (double)line->latency.i <= max_latency))) {
        rc = 0;
        goto done;
    }
    Py_INCREF(cid);
    values[0] = cid;
    if ((values[1] = ranked_of(bd, line, passage_cls)) == NULL || bd->out_of_range
        || (values[2] = text_of(bd, &line->answer)) == NULL || (values[3] = PyList_New(0)) == NULL) {
        rc = bd->out_of_range && !PyErr_Occurred() ? 0 : -1;
        goto done;
    }
    for (Py_ssize_t i = 0; i < nrest; i++) {
        values[5 + i] = PyTuple_GET_ITEM(rest, i);
        Py_INCREF(values[5 + i]);
    }
    if ((out = build_slots((PyTypeObject *)out_cls, out_slots, values, n)) != NULL)
        rc = PyDict_SetItem(outputs, cid, out) < 0 ? -1 : 1;
done:
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(values[i]);
    Py_XDECREF(cid);
    Py_XDECREF(out);
    return rc;
}

/* ranked_outputs(scanned, passage_cls, decode, known, out_cls, out_slots, rest, max_latency): what
 * gate.targets.results.read_results gives for a scanned file whose every line names (by id) a case of known (a set of
 * case ids, or a dict of each case's id to itself: the outputs then keyed by the cases' own strs), once,
 * with a latency_ms that is None or from 0 to max_latency: {case id: out_cls(id, [passage_cls(id, score)...], answer,
 * [], latency_ms, *rest)} in the file's order, each built into its slots (out_slots: the member descriptors in field
 * order). None for any other file (read_results' own loop then reads it and says what is wrong with it). */
PyObject *ranked_outputs(PyObject *self, PyObject *args) {
    PyObject *capsule, *ctx[5], *decode, *outputs;
    double max_latency;
    Build bd;
    int rc = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOO!O!O!d", &capsule, &ctx[0], &decode, &ctx[1], &PyType_Type, &ctx[2],
                          &PyTuple_Type, &ctx[3], &PyTuple_Type, &ctx[4], &max_latency))
        return NULL;
    if (!PyDict_Check(ctx[1]) && !PyAnySet_Check(ctx[1])) {
        PyErr_SetString(PyExc_TypeError, "known must be a dict (case id -> its str) or a set of case ids");
        return NULL;
    }
    if (build_open(&bd, capsule, decode) < 0)
        return NULL;
    if ((outputs = PyDict_New()) != NULL)
        for (Py_ssize_t i = 0; i < bd.s->nlines && rc == 1; i++)
            rc = output_of(&bd, &bd.s->lines[i], ctx, max_latency, outputs);
    build_close(&bd);
    if (outputs == NULL)
        return NULL;
    if (rc < 0 && PyErr_ExceptionMatches(PyExc_ValueError)) { /* msgspec refused an escaped string (as build_ranked) */
        PyErr_Clear();
        rc = 0;
    }
    if (rc < 0) {
        Py_DECREF(outputs);
        return NULL;
    }
    if (rc == 0) {
        Py_DECREF(outputs);
        Py_RETURN_NONE;
    }
    return outputs;
}
