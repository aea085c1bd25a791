/* gate.core._native: the retrieval run's hot loops in C. Optional: when this module is not built, the pure Python code
 * it mirrors runs instead, to the same values bit for bit (tests/unit/test_native.py holds the two to it).
 *
 * score_case(plan, ids, relevant) is gate.core.retrieval_onepass.case_scorer's per-case function: the same ranks,
 * the same float operations in the same order. It returns None for what it does not take (a grade that is not a
 * small int, an ideal DCG of 0, a k that is not an int where one is needed), and the caller then runs the Python
 * code, which gives its value or its error.
 *
 * one_value_a_line(raw) is gate.targets.results._one_value_a_line, and also says whether raw is valid UTF-8.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#endif

#define MAX_SMALL_INT 9007199254740992LL /* 2**53: an int up to it is a double exactly */

enum { HIT_RATE, MRR, RECALL, PRECISION, NDCG, MAP };

typedef struct {
    Py_ssize_t place; /* first place in ids */
    long long grade;
    PyObject *rid;    /* borrowed: a key of relevant */
} Place;

static int by_place(const void *a, const void *b) {
    Py_ssize_t x = ((const Place *)a)->place, y = ((const Place *)b)->place;
    return (x > y) - (x < y);
}

static int by_grade_down(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x < y) - (x > y);
}

static double log2_rank(Py_ssize_t rank) { return log2((double)(rank + 1)); } /* math.log2(rank + 1) */

/* sum() of the doubles xs[0..n), as the builtin sum() adds floats on this Python (3.12 on: Neumaier's compensated
 * sum, as CPython's builtin_sum_impl; before: one addition after another). */
static double py_sum(const double *xs, Py_ssize_t n) {
    double f = 0.0;
#if PY_VERSION_HEX >= 0x030C0000
    double c = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        double x = xs[i], t = f + x;
        if (fabs(f) >= fabs(x))
            c += (f - t) + x;
        else
            c += (x - t) + f;
        f = t;
    }
    if (c && isfinite(c))
        f += c;
#else
    for (Py_ssize_t i = 0; i < n; i++)
        f += xs[i];
#endif
    return f;
}

/* The int value of a grade, if it is an int of at most 2**53 in size (else -1 and *ok = 0). */
static long long small_int(PyObject *v, int *ok) {
    int overflow = 0;
    long long g;
    if (!PyLong_Check(v)) {
        *ok = 0;
        return -1;
    }
    g = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || g > MAX_SMALL_INT || g < -MAX_SMALL_INT) {
        *ok = 0;
        return -1;
    }
    return g;
}

/* The number of ranks in the sorted ranks[0..n) that are <= k: bisect.bisect_right(ranks, k). */
static Py_ssize_t upto(const Py_ssize_t *ranks, Py_ssize_t n, Py_ssize_t k) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (k < ranks[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* A str's hash, -1 for what is not exactly a str (whose equality only == tells). */
static Py_hash_t str_hash(PyObject *x) { return PyUnicode_CheckExact(x) ? PyObject_Hash(x) : -1; }

/* Whether ids[i] == x (x's hash hx as str_hash gives it): two strs of different hashes are not equal. */
static int id_equals(PyObject *ids, const Py_hash_t *hashes, Py_ssize_t i, PyObject *x, Py_hash_t hx) {
    if (hashes[i] != -1 && hx != -1 && hashes[i] != hx)
        return 0;
    return PyObject_RichCompareBool(PyList_GET_ITEM(ids, i), x, Py_EQ);
}

/* The number of distinct ids in ids[0..end): len(set(ids[:end])); -1 on error. */
static Py_ssize_t distinct_before(PyObject *ids, const Py_hash_t *hashes, Py_ssize_t end) {
    PyObject *head, *set;
    Py_ssize_t n;
    if (end <= 64) { /* a short head of strs: each one against those before it */
        int strs = 1;
        for (Py_ssize_t i = 0; i < end && strs; i++)
            strs = hashes[i] != -1;
        if (strs) {
            Py_ssize_t distinct = 0;
            for (Py_ssize_t i = 0; i < end; i++) {
                int seen = 0;
                for (Py_ssize_t j = 0; j < i && !seen; j++) {
                    seen = id_equals(ids, hashes, j, PyList_GET_ITEM(ids, i), hashes[i]);
                    if (seen < 0)
                        return -1;
                }
                distinct += !seen;
            }
            return distinct;
        }
    }
    head = PyList_GetSlice(ids, 0, end);
    if (head == NULL)
        return -1;
    set = PySet_New(head);
    Py_DECREF(head);
    if (set == NULL)
        return -1;
    n = PySet_GET_SIZE(set);
    Py_DECREF(set);
    return n;
}

typedef struct {
    int kind;
    int has_k;
    Py_ssize_t k;
} Step;

/* plan: a tuple of (kind, k or None) pairs, as case_scorer builds it. 0 when it is one this code does not take. */
static int read_plan(PyObject *plan, Step *steps, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(plan, i), *k;
        long kind;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyLong_Check(PyTuple_GET_ITEM(pair, 0)))
            return 0;
        kind = PyLong_AsLong(PyTuple_GET_ITEM(pair, 0));
        k = PyTuple_GET_ITEM(pair, 1);
        if (kind < HIT_RATE || kind > MAP)
            return 0;
        steps[i].kind = (int)kind;
        steps[i].has_k = k != Py_None;
        steps[i].k = 0;
        if (k != Py_None) {
            if (!PyLong_CheckExact(k))
                return 0;
            steps[i].k = PyLong_AsSsize_t(k);
            if (steps[i].k == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
        } else if (kind == HIT_RATE || kind == PRECISION) {
            return 0; /* first <= None: the Python code's TypeError */
        }
        if (kind == PRECISION && steps[i].k <= 0)
            return 0; /* a division by 0 or a negative k: the Python code says what it does */
    }
    return 1;
}

/* The value of one metric (steps[s]) of a case whose n relevant ids were found at ranks[0..nfound) with grades. */
static double metric(const Step *st, Py_ssize_t n, const Py_ssize_t *ranks, const long long *grades,
                     Py_ssize_t nfound, double idcg_for_k, double *xs) {
    Py_ssize_t first = nfound ? ranks[0] : 0;
    Py_ssize_t k = st->k;
    if (!n)
        return 0.0;
    switch (st->kind) {
    case HIT_RATE:
        return first && first <= k ? 1.0 : 0.0;
    case MRR:
        return !first || (st->has_k && first > k) ? 0.0 : 1.0 / (double)first;
    case RECALL:
        return (double)(st->has_k ? upto(ranks, nfound, k) : nfound) / (double)n;
    case PRECISION:
        return (double)upto(ranks, nfound, k) / (double)k;
    case NDCG: {
        Py_ssize_t m = 0;
        for (Py_ssize_t i = 0; i < nfound; i++)
            if (!st->has_k || ranks[i] <= k)
                xs[m++] = (double)grades[i] / log2_rank(ranks[i]);
        return py_sum(xs, m) / idcg_for_k;
    }
    default: { /* MAP */
        double total = 0.0;
        for (Py_ssize_t j = 0; j < nfound; j++) {
            if (st->has_k && ranks[j] > k)
                break;
            total += (double)(j + 1) / (double)ranks[j];
        }
        return total / (double)n;
    }
    }
}

/* The DCG of the ideal list of the grades (sorted from the highest), cut at k (has_k); xs: room for n doubles. */
static double ideal_dcg(const long long *sorted, Py_ssize_t n, int has_k, Py_ssize_t k, double *xs) {
    Py_ssize_t m = has_k && k < n ? (k < 0 ? 0 : k) : n;
    for (Py_ssize_t r = 0; r < m; r++)
        xs[r] = (double)sorted[r] / log2_rank(r + 1);
    return py_sum(xs, m);
}

typedef struct {
    Place *places;
    long long *all_grades; /* every relevant id's grade, then sorted from the highest */
    Py_ssize_t *ranks;
    long long *found_grades;
    double *xs; /* room for the terms of a sum */
    Py_hash_t *hashes; /* each id's hash when it is a str (cached by the str), else -1 */
} Scratch;

static void free_scratch(Scratch *s) {
    PyMem_Free(s->places);
    PyMem_Free(s->all_grades);
    PyMem_Free(s->ranks);
    PyMem_Free(s->found_grades);
    PyMem_Free(s->xs);
    PyMem_Free(s->hashes);
}

/* Each relevant id's first place in ids (into s->places, sorted by place) and the ranks dict with every key None.
 * *nplaces is how many were found. 0: not taken (a grade that is no small int); -1: error. */
static int find_places(PyObject *ids, PyObject *relevant, PyObject *ranks_dict, Scratch *s, Py_ssize_t *nplaces) {
    Py_ssize_t pos = 0, n_ids = PyList_GET_SIZE(ids), np = 0, r = 0;
    PyObject *rid, *grade;
    while (PyDict_Next(relevant, &pos, &rid, &grade)) {
        int ok = 1;
        long long g = small_int(grade, &ok);
        Py_hash_t hr = str_hash(rid);
        if (hr == -1 && PyErr_Occurred())
            return -1;
        if (!ok)
            return 0;
        s->all_grades[r++] = g;
        for (Py_ssize_t i = 0; i < n_ids; i++) {
            int eq = id_equals(ids, s->hashes, i, rid, hr);
            if (eq < 0)
                return -1;
            if (eq) {
                s->places[np].place = i;
                s->places[np].grade = g;
                s->places[np].rid = rid;
                np++;
                break;
            }
        }
        if (PyDict_SetItem(ranks_dict, rid, Py_None) < 0)
            return -1;
    }
    if (np > 1)
        qsort(s->places, (size_t)np, sizeof(Place), by_place); /* places are distinct */
    *nplaces = np;
    return 1;
}

/* Each found id's rank (the distinct ids before its first place, plus one) into s->ranks and the ranks dict. */
static int set_ranks(PyObject *ids, PyObject *ranks_dict, Scratch *s, Py_ssize_t np) {
    Py_ssize_t last = np ? s->places[np - 1].place : 0;
    int unique;
    Py_ssize_t d = np ? distinct_before(ids, s->hashes, last) : 0;
    if (d < 0)
        return -1;
    unique = d == last;
    for (Py_ssize_t i = 0; i < np; i++) {
        Py_ssize_t rank = unique ? s->places[i].place + 1 : distinct_before(ids, s->hashes, s->places[i].place) + 1;
        PyObject *value;
        if (rank <= 0)
            return -1;
        value = PyLong_FromSsize_t(rank);
        if (value == NULL || PyDict_SetItem(ranks_dict, s->places[i].rid, value) < 0) {
            Py_XDECREF(value);
            return -1;
        }
        Py_DECREF(value);
        s->ranks[i] = rank;
        s->found_grades[i] = s->places[i].grade;
    }
    return 1;
}

/* The row of metric values: a list of floats (NULL on error, Py_None when not taken: an ideal DCG of 0). */
static PyObject *values_row(const Step *steps, Py_ssize_t nsteps, Scratch *s, Py_ssize_t n, Py_ssize_t np) {
    PyObject *row = PyList_New(nsteps);
    if (row == NULL)
        return NULL;
    if (n > 1)
        qsort(s->all_grades, (size_t)n, sizeof(long long), by_grade_down);
    for (Py_ssize_t i = 0; i < nsteps; i++) {
        double idcg = 1.0, v;
        PyObject *f;
        if (steps[i].kind == NDCG && n) {
            idcg = ideal_dcg(s->all_grades, n, steps[i].has_k, steps[i].k, s->xs);
            if (idcg == 0.0) { /* the Python code's ZeroDivisionError */
                Py_DECREF(row);
                Py_RETURN_NONE;
            }
        }
        v = metric(&steps[i], n, s->ranks, s->found_grades, np, idcg, s->xs);
        f = PyFloat_FromDouble(v);
        if (f == NULL) {
            Py_DECREF(row);
            return NULL;
        }
        PyList_SET_ITEM(row, i, f);
    }
    return row;
}

static PyObject *rank_list(const Py_ssize_t *ranks, Py_ssize_t np) {
    PyObject *out = PyList_New(np);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < np; i++) {
        PyObject *r = PyLong_FromSsize_t(ranks[i]);
        if (r == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, r);
    }
    return out;
}

static PyObject *score_case(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *plan, *ids, *relevant, *ranks_dict = NULL, *row = NULL, *found = NULL, *result = NULL;
    Step steps_small[16], *steps = steps_small;
    Scratch s = {NULL, NULL, NULL, NULL, NULL, NULL};
    Py_ssize_t nsteps, n, np = 0;
    int taken;
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "score_case(plan, ids, relevant)");
        return NULL;
    }
    plan = args[0], ids = args[1], relevant = args[2];
    if (!PyTuple_Check(plan) || !PyList_CheckExact(ids) || !PyDict_CheckExact(relevant))
        Py_RETURN_NONE;
    nsteps = PyTuple_GET_SIZE(plan);
    n = PyDict_GET_SIZE(relevant);
    if (nsteps > 16 && (steps = PyMem_Malloc(sizeof(Step) * (size_t)nsteps)) == NULL)
        return PyErr_NoMemory();
    if (!read_plan(plan, steps, nsteps)) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    s.places = PyMem_Malloc(sizeof(Place) * (size_t)(n + 1));
    s.all_grades = PyMem_Malloc(sizeof(long long) * (size_t)(n + 1));
    s.ranks = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    s.found_grades = PyMem_Malloc(sizeof(long long) * (size_t)(n + 1));
    s.xs = PyMem_Malloc(sizeof(double) * (size_t)(n + 1));
    s.hashes = PyMem_Malloc(sizeof(Py_hash_t) * (size_t)(PyList_GET_SIZE(ids) + 1));
    ranks_dict = PyDict_New();
    if (!s.places || !s.all_grades || !s.ranks || !s.found_grades || !s.xs || !s.hashes || ranks_dict == NULL) {
        if (ranks_dict != NULL)
            PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ids); i++)
        if ((s.hashes[i] = str_hash(PyList_GET_ITEM(ids, i))) == -1 && PyErr_Occurred())
            goto done;
    taken = find_places(ids, relevant, ranks_dict, &s, &np);
    if (taken <= 0) {
        if (taken == 0) {
            result = Py_None;
            Py_INCREF(result);
        }
        goto done;
    }
    if (set_ranks(ids, ranks_dict, &s, np) < 0)
        goto done;
    row = values_row(steps, nsteps, &s, n, np);
    if (row == NULL || row == Py_None) {
        result = row;
        row = NULL;
        goto done;
    }
    found = rank_list(s.ranks, np);
    if (found != NULL)
        result = PyTuple_Pack(3, ranks_dict, found, row);
done:
    Py_XDECREF(ranks_dict);
    Py_XDECREF(found);
    Py_XDECREF(row);
    free_scratch(&s);
    if (steps != steps_small)
        PyMem_Free(steps);
    return result;
}

/* Whether raw[0..n) is valid UTF-8 (as bytes.decode("utf-8") takes it: no surrogates, no overlong forms). */
static int valid_utf8(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            while (i + 32 <= n) { /* ASCII, 32 bytes at a time */
                uint64_t w[4];
                memcpy(w, p + i, 32);
                if ((w[0] | w[1] | w[2] | w[3]) & 0x8080808080808080ULL)
                    break;
                i += 32;
            }
            while (i < n && p[i] < 0x80)
                i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (p[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
            if (i + 2 >= n || p[i + 1] < lo || p[i + 1] > hi || (p[i + 2] & 0xC0) != 0x80)
                return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
            if (i + 3 >= n || p[i + 1] < lo || p[i + 1] > hi || (p[i + 2] & 0xC0) != 0x80 || (p[i + 3] & 0xC0) != 0x80)
                return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* (lines, utf8): how many lines raw holds when each newline (LF, or CRLF throughout) stands between '}' and '{' or
 * ends the file, else None; and whether raw is valid UTF-8. */
static PyObject *one_value_a_line(PyObject *self, PyObject *arg) {
    Py_buffer view;
    const unsigned char *p, *at;
    Py_ssize_t n, lines = 0, crs = 0;
    int crlf, utf8, ok = 1;
    (void)self;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    p = view.buf;
    n = view.len;
    Py_BEGIN_ALLOW_THREADS
    crlf = memchr(p, '\r', (size_t)n) != NULL;
    at = memchr(p, '\n', (size_t)n);
    while (at != NULL) {
        Py_ssize_t i = at - p, close = crlf ? i - 2 : i - 1;
        if (close < 0 || p[close] != '}' || (crlf && p[i - 1] != '\r') || (i + 1 < n && p[i + 1] != '{')) {
            ok = 0;
            break;
        }
        lines++;
        at = i + 1 < n ? memchr(p + i + 1, '\n', (size_t)(n - i - 1)) : NULL;
    }
    if (ok && crlf) {
        const unsigned char *q = p;
        while ((q = memchr(q, '\r', (size_t)(n - (q - p)))) != NULL) {
            crs++;
            q++;
            if (q >= p + n)
                break;
        }
        ok = crs == lines; /* a CR that does not end a line */
    }
    utf8 = valid_utf8(p, n);
    Py_END_ALLOW_THREADS
    if (ok && n && p[n - 1] != '\n')
        lines++;
    PyBuffer_Release(&view);
    if (!ok)
        return Py_BuildValue("(OO)", Py_None, utf8 ? Py_True : Py_False);
    return Py_BuildValue("(nO)", lines, utf8 ? Py_True : Py_False);
}


/* ---- the notes and the stale-label bound: loops over every case's retrieved passages ---- */

#ifndef Py_T_OBJECT_EX
#include <structmember.h>
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif
#ifndef Py_AUDIT_READ
#define Py_AUDIT_READ PY_AUDIT_READ
#endif

/* obj.name read straight from its slot where obj's type keeps name in one (a member descriptor, and the generic
 * attribute lookup, as dataclasses with slots and msgspec's structs do): what PyObject_GetAttr gives, without looking
 * name up through the type's dictionaries for each of 200,000 passages. The types seen are held (a type's address is
 * then never another's) with their version tag: a type changed since is looked up again. */
typedef struct {
    PyTypeObject *type;
    PyObject *name;
    Py_ssize_t offset;
    unsigned int version;
} AttrSlot;

static AttrSlot attr_slots[32];
static int attr_used;

static PyObject *attr(PyObject *obj, PyObject *name) {
    PyTypeObject *t = Py_TYPE(obj);
    int valid = (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) != 0, i = 0;
    PyObject *v;
    while (i < attr_used && !(attr_slots[i].type == t && attr_slots[i].name == name))
        i++;
    if (i == attr_used || !valid || t->tp_version_tag != attr_slots[i].version) { /* not seen, or changed since */
        PyObject *d = i < 32 && t->tp_getattro == PyObject_GenericGetAttr && PyUnicode_CheckExact(name) ? _PyType_Lookup(t, name) : NULL;
        PyMemberDef *m = d != NULL && Py_TYPE(d) == &PyMemberDescr_Type ? ((PyMemberDescrObject *)d)->d_member : NULL;
        if (m == NULL || !valid || m->type != Py_T_OBJECT_EX || (m->flags & Py_AUDIT_READ))
            return PyObject_GetAttr(obj, name);
        if (i == attr_used) {
            Py_INCREF(t);
            Py_INCREF(name);
            attr_used++;
        }
        attr_slots[i] = (AttrSlot){t, name, m->offset, t->tp_version_tag};
    }
    v = *(PyObject **)((char *)obj + attr_slots[i].offset);
    if (v == NULL)
        return PyObject_GetAttr(obj, name); /* unset: its AttributeError */
    Py_INCREF(v);
    return v;
}

int ranked_check(PyObject *o); /* _ranked.c: RankedPassages */
PyObject *ranked_ids(PyObject *self, Py_ssize_t upto);
int ranked_unsorted(PyObject *self);
int ranked_clean(PyObject *o);
Py_ssize_t ranked_length_of(PyObject *o);
PyObject *ranked_id_at(PyObject *o, Py_ssize_t i);
int ranked_ready(PyObject *module);

static PyObject *s_id, *s_relevant, *s_error, *s_retrieved, *s_score, *s_get, *s_strip, *s_casefold;

/* outputs.get(key) as a new reference (NULL: error). */
static PyObject *mapping_get(PyObject *mapping, PyObject *key) {
    if (PyDict_CheckExact(mapping)) {
        PyObject *v = PyDict_GetItemWithError(mapping, key);
        if (v == NULL && PyErr_Occurred())
            return NULL;
        v = v ? v : Py_None;
        Py_INCREF(v);
        return v;
    }
    return PyObject_CallMethodOneArg(mapping, s_get, key);
}

/* ASCII whitespace as str.strip() strips it (str.isspace() of each character below 128). */
static int ascii_space(Py_UCS1 c) { return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20); }

/* x.strip().casefold(), as a new reference (an ASCII str stripped and lowered here: its casefold). */
static PyObject *folded(PyObject *x) {
    PyObject *stripped, *out;
    if (PyUnicode_CheckExact(x) && PyUnicode_IS_ASCII(x)) {
        const Py_UCS1 *p = PyUnicode_1BYTE_DATA(x);
        Py_ssize_t lo = 0, hi = PyUnicode_GET_LENGTH(x);
        while (lo < hi && ascii_space(p[lo]))
            lo++;
        while (hi > lo && ascii_space(p[hi - 1]))
            hi--;
        out = PyUnicode_New(hi - lo, 127);
        if (out == NULL)
            return NULL;
        for (Py_ssize_t i = lo; i < hi; i++)
            PyUnicode_1BYTE_DATA(out)[i - lo] = (Py_UCS1)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] + 32 : p[i]);
        return out;
    }
    stripped = PyObject_CallMethodNoArgs(x, s_strip);
    if (stripped == NULL)
        return NULL;
    out = PyObject_CallMethodNoArgs(stripped, s_casefold);
    Py_DECREF(stripped);
    return out;
}

/* Whether the ASCII str x, stripped and lowered (its casefold), equals the str key. */
static int ascii_fold_equals(PyObject *x, PyObject *key) {
    const Py_UCS1 *p = PyUnicode_1BYTE_DATA(x), *k;
    Py_ssize_t lo = 0, hi = PyUnicode_GET_LENGTH(x);
    if (!PyUnicode_IS_ASCII(key))
        return 0;
    while (lo < hi && ascii_space(p[lo]))
        lo++;
    while (hi > lo && ascii_space(p[hi - 1]))
        hi--;
    if (hi - lo != PyUnicode_GET_LENGTH(key))
        return 0;
    k = PyUnicode_1BYTE_DATA(key);
    for (Py_ssize_t i = lo; i < hi; i++) {
        Py_UCS1 c = p[i];
        if (c >= 'A' && c <= 'Z')
            c = (Py_UCS1)(c + 32);
        if (c != k[i - lo])
            return 0;
    }
    return 1;
}

/* The relevant id in missed (fold -> id) that id folds to, borrowed (NULL and no error: none; NULL and an error). */
static PyObject *missed_for(PyObject *missed, PyObject *id) {
    if (PyUnicode_CheckExact(id) && PyUnicode_IS_ASCII(id)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(missed, &pos, &key, &value))
            if (PyUnicode_CheckExact(key) && ascii_fold_equals(id, key))
                return value;
        return NULL;
    } else {
        PyObject *f = folded(id), *v;
        if (f == NULL)
            return NULL;
        v = PyDict_GetItemWithError(missed, f);
        Py_DECREF(f);
        return v;
    }
}

/* The ids of a sequence of passages, as a new list (NULL: error). */
static PyObject *passage_ids(PyObject *retrieved, Py_ssize_t upto) {
    if (ranked_check(retrieved)) /* as the scan kept them */
        return ranked_ids(retrieved, upto);
    PyObject *seq = PySequence_Fast(retrieved, "retrieved must be a sequence"), *ids;
    Py_ssize_t n;
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    if (upto >= 0 && upto < n)
        n = upto;
    ids = PyList_New(n);
    if (ids != NULL)
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *id = attr(PySequence_Fast_GET_ITEM(seq, i), s_id);
            if (id == NULL) {
                Py_CLEAR(ids);
                break;
            }
            PyList_SET_ITEM(ids, i, id);
        }
    Py_DECREF(seq);
    return ids;
}

/* Whether x is in the list ids (==; two strs of different hashes are not equal); -1 on error. */
static int in_first(PyObject *ids, Py_ssize_t n, PyObject *x);

static int in_ids(PyObject *ids, PyObject *x) { return in_first(ids, PyList_GET_SIZE(ids), x); }

/* Whether x is among the first n ids of ids: a list, or a RankedPassages (its ids where it keeps them). */
static int in_first(PyObject *ids, Py_ssize_t n, PyObject *x) {
    Py_hash_t hx = str_hash(x);
    int ranked = ranked_check(ids);
    if (hx == -1 && PyErr_Occurred())
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = ranked ? ranked_id_at(ids, i) : PyList_GET_ITEM(ids, i);
        int eq;
        if (item == x)
            return 1;
        if (hx != -1 && PyUnicode_CheckExact(item)) {
            Py_hash_t hi = PyObject_Hash(item);
            if (hi == -1)
                return -1;
            if (hi != hx)
                continue;
        }
        eq = PyObject_RichCompareBool(item, x, Py_EQ);
        if (eq)
            return eq;
    }
    return 0;
}

/* Whether n ASCII bytes are left as they are by their fold (strip, casefold): no capital, no space at either end.
 * (Also the scan's, in _ranked.c, for each distinct id it keeps.) */
int ascii_folds_to_itself(const unsigned char *p, Py_ssize_t n) {
    if (n && (ascii_space(p[0]) || ascii_space(p[n - 1])))
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] >= 'A' && p[i] <= 'Z')
            return 0;
    return 1;
}

/* Whether x is an ASCII str that its own fold leaves as it is (ascii_folds_to_itself). Two such strs fold alike only
 * when they are equal. */
static int clean_id(PyObject *x) {
    if (!PyUnicode_CheckExact(x) || !PyUnicode_IS_ASCII(x))
        return 0;
    return ascii_folds_to_itself(PyUnicode_1BYTE_DATA(x), PyUnicode_GET_LENGTH(x));
}

/* The relevant ids not in ids, by their fold (a later id of the same fold replaces an earlier one, as {..} does): a
 * new dict, or NULL on error. */
static PyObject *missed_of(PyObject *relevant, PyObject *ids) {
    PyObject *missed = PyDict_New(), *key, *value;
    Py_ssize_t pos = 0;
    if (missed == NULL)
        return NULL;
    while (PyDict_Next(relevant, &pos, &key, &value)) {
        int in = in_ids(ids, key);
        PyObject *f;
        if (in < 0 || (!in && (f = folded(key)) == NULL))
            goto fail;
        if (in)
            continue;
        in = PyDict_SetItem(missed, f, key);
        Py_DECREF(f);
        if (in < 0)
            goto fail;
    }
    return missed;
fail:
    Py_DECREF(missed);
    return NULL;
}

/* One case of near_ids: appends (case id, the id retrieved, the relevant id) to found. -1 on error. A clean id
 * (clean_id) can fold as a missed relevant id only when one of the two is not clean: while every missed id is clean,
 * the clean ids retrieved are passed over without a lookup. */
static int near_ids_of(PyObject *cid, PyObject *relevant, PyObject *ids, PyObject *found) {
    PyObject *missed = NULL, *key, *value;
    Py_ssize_t pos = 0, n = PyList_GET_SIZE(ids), nmissed = 0;
    int rc = -1, dirty = 0;
    while (PyDict_Next(relevant, &pos, &key, &value)) {
        int in = in_ids(ids, key);
        if (in < 0)
            return -1;
        if (!in) {
            nmissed++;
            dirty = dirty || !clean_id(key);
        }
    }
    for (Py_ssize_t i = 0; i < n && nmissed; i++) {
        PyObject *id = PyList_GET_ITEM(ids, i), *want, *item;
        int in;
        if (!dirty && clean_id(id))
            continue;
        if ((in = PyDict_Contains(relevant, id)) < 0)
            goto done;
        if (in)
            continue;
        if (missed == NULL && (missed = missed_of(relevant, ids)) == NULL)
            goto done;
        want = missed_for(missed, id);
        if (want == NULL) {
            if (PyErr_Occurred())
                goto done;
            continue;
        }
        item = PyTuple_Pack(3, cid, id, want);
        if (item == NULL || PyList_Append(found, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    rc = 0;
done:
    Py_XDECREF(missed);
    return rc;
}

/* Whether every key of the dict d is a clean id (clean_id). */
static int keys_clean(PyObject *d) {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(d, &pos, &key, &value))
        if (!clean_id(key))
            return 0;
    return 1;
}

/* near_ids(cases, outputs): gate.run.notes.near_ids_note's list of (case id, the id retrieved, the relevant id). */
static PyObject *near_ids(PyObject *self, PyObject *args) {
    PyObject *cases, *outputs, *found, *it, *c;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &cases, &outputs) || (found = PyList_New(0)) == NULL)
        return NULL;
    if ((it = PyObject_GetIter(cases)) == NULL)
        goto fail;
    while ((c = PyIter_Next(it)) != NULL) {
        PyObject *cid = attr(c, s_id), *out = NULL, *rel = NULL, *err = NULL, *ret = NULL, *ids = NULL;
        int bad = cid == NULL || (out = mapping_get(outputs, cid)) == NULL, skip = 0;
        if (!bad && out != Py_None) {
            bad = (rel = attr(c, s_relevant)) == NULL;
            skip = bad ? 0 : PyObject_Not(rel);
            bad = bad || skip < 0;
            if (!bad && !skip) {
                bad = (err = attr(out, s_error)) == NULL;
                skip = !bad && err != Py_None;
            }
            if (!bad && !skip) {
                bad = (ret = attr(out, s_retrieved)) == NULL;
                if (!bad && !PyDict_Check(rel))
                    bad = (PyErr_SetString(PyExc_TypeError, "relevant must be a dict"), 1);
                skip = !bad && ranked_clean(ret) && keys_clean(rel); /* every id folds to itself: none to another */
                bad = bad || (!skip && ((ids = passage_ids(ret, -1)) == NULL || near_ids_of(cid, rel, ids, found) < 0));
            }
        }
        Py_XDECREF(cid), Py_XDECREF(out), Py_XDECREF(rel), Py_XDECREF(err), Py_XDECREF(ret), Py_XDECREF(ids);
        Py_DECREF(c);
        if (bad) {
            Py_DECREF(it);
            goto fail;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        goto fail;
    return found;
fail:
    Py_DECREF(found);
    return NULL;
}

/* Whether a list of passages carries scores out of descending order (those that are not None). -1 on error. */
static int scores_unsorted(PyObject *retrieved) {
    if (ranked_check(retrieved))
        return ranked_unsorted(retrieved);
    PyObject *seq = PySequence_Fast(retrieved, "retrieved must be a sequence"), *prev = NULL;
    int out = 0;
    if (seq == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && !out; i++) {
        PyObject *score = attr(PySequence_Fast_GET_ITEM(seq, i), s_score);
        if (score == NULL) {
            out = -1;
            break;
        }
        if (score == Py_None) {
            Py_DECREF(score);
            continue;
        }
        if (prev != NULL) {
            if (PyFloat_CheckExact(prev) && PyFloat_CheckExact(score))
                out = PyFloat_AS_DOUBLE(prev) < PyFloat_AS_DOUBLE(score);
            else
                out = PyObject_RichCompareBool(prev, score, Py_LT);
            Py_DECREF(prev);
        }
        prev = score;
    }
    Py_XDECREF(prev);
    Py_DECREF(seq);
    return out;
}

/* unsorted_scores(cases, outputs): (how many cases list scores out of descending order, the first one's id or None). */
static PyObject *unsorted_scores(PyObject *self, PyObject *args) {
    PyObject *cases, *outputs, *it, *c, *first = Py_None;
    Py_ssize_t count = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &cases, &outputs) || (it = PyObject_GetIter(cases)) == NULL)
        return NULL;
    Py_INCREF(first);
    while ((c = PyIter_Next(it)) != NULL) {
        PyObject *cid = attr(c, s_id), *out = NULL, *ret = NULL;
        int u = -1;
        if (cid != NULL && (out = PyObject_GetItem(outputs, cid)) != NULL && (ret = attr(out, s_retrieved)) != NULL)
            u = scores_unsorted(ret);
        if (u > 0 && count++ == 0) {
            Py_SETREF(first, cid);
            cid = NULL;
        }
        Py_XDECREF(cid), Py_XDECREF(out), Py_XDECREF(ret);
        Py_DECREF(c);
        if (u < 0) {
            Py_DECREF(it);
            Py_DECREF(first);
            return NULL;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        Py_DECREF(first);
        return NULL;
    }
    return Py_BuildValue("(nN)", count, first);
}

/* clearly_fresh(answered, outputs, cutoff): gate.stages.retrieval._clearly_fresh. */
static PyObject *clearly_fresh(PyObject *self, PyObject *args) {
    PyObject *answered, *outputs, *it, *c, *found;
    Py_ssize_t cutoff, within = 0, hits;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOn", &answered, &outputs, &cutoff))
        return NULL;
    if (cutoff < 0) {
        PyErr_SetString(PyExc_ValueError, "cutoff must be 0 or more");
        return NULL;
    }
    if ((found = PySet_New(NULL)) == NULL || (it = PyObject_GetIter(answered)) == NULL) {
        Py_XDECREF(found);
        return NULL;
    }
    while ((c = PyIter_Next(it)) != NULL) {
        PyObject *cid = attr(c, s_id), *out = NULL, *ret = NULL, *top = NULL, *rel = NULL, *key, *value;
        Py_ssize_t pos = 0, n = 0;
        int bad = cid == NULL || (out = PyObject_GetItem(outputs, cid)) == NULL || (ret = attr(out, s_retrieved)) == NULL;
        if (!bad && ranked_check(ret)) { /* its ids read where it keeps them */
            n = ranked_length_of(ret) < cutoff ? ranked_length_of(ret) : cutoff;
            Py_INCREF(ret);
            top = ret;
        } else if (!bad) {
            bad = (top = passage_ids(ret, cutoff)) == NULL;
            n = bad ? 0 : PyList_GET_SIZE(top);
        }
        bad = bad || (rel = attr(c, s_relevant)) == NULL;
        if (!bad && !PyDict_Check(rel)) {
            PyErr_SetString(PyExc_TypeError, "relevant must be a dict");
            bad = 1;
        }
        if (!bad) {
            within += n;
            while (!bad && PyDict_Next(rel, &pos, &key, &value)) {
                int in = in_first(top, n, key);
                bad = in < 0 || (in && PySet_Add(found, key) < 0);
            }
        }
        Py_XDECREF(cid), Py_XDECREF(out), Py_XDECREF(ret), Py_XDECREF(top), Py_XDECREF(rel);
        Py_DECREF(c);
        if (bad) {
            Py_DECREF(it);
            Py_DECREF(found);
            return NULL;
        }
    }
    Py_DECREF(it);
    hits = PySet_GET_SIZE(found);
    Py_DECREF(found);
    if (PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(hits * 100 >= within);
}

/* ---- the golden set's fingerprint text ---- */

static PyObject *s_relevant_texts, *s_expected_keywords, *s_checks, *s_paraphrases, *s_question, *s_ground_truth, *s_type;
/* The text is written as UTF-8 into one growing buffer, then hashed: no piece is a Python object of its own. */
typedef struct {
    char *b;
    Py_ssize_t n, cap;
} Buf;

static int buf_put(Buf *w, const char *p, Py_ssize_t n) {
    if (w->n + n > w->cap) {
        Py_ssize_t cap = w->cap ? w->cap : 65536;
        char *grown;
        while (cap < w->n + n) {
            if (cap > PY_SSIZE_T_MAX / 2) {
                PyErr_NoMemory();
                return -1;
            }
            cap *= 2;
        }
        if ((grown = PyMem_Realloc(w->b, (size_t)cap)) == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        w->b = grown;
        w->cap = cap;
    }
    memcpy(w->b + w->n, p, (size_t)n);
    w->n += n;
    return 0;
}

#define PUT(w, lit) buf_put((w), (lit), (Py_ssize_t)(sizeof(lit) - 1))

/* A str's UTF-8 (UnicodeEncodeError for a lone surrogate, as str.encode gives), appended. */
static int buf_utf8(Buf *w, PyObject *text) {
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(text, &n);
    return u == NULL ? -1 : buf_put(w, u, n);
}

/* Whether a str holds no character that a JSON string escapes ('"', '\\', a control character below 0x20). */
static int plain(PyObject *value) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(value);
    int kind = PyUnicode_KIND(value);
    const void *data = PyUnicode_DATA(value);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = data, *end = p + n;
#if defined(__SSE2__) && defined(__GNUC__)
        const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'), below = _mm_set1_epi8(0x1F);
        for (; end - p >= 16; p += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
            /* unsigned: a byte is at most 0x1F when the smaller of it and 0x1F is itself */
            __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)),
                                       _mm_cmpeq_epi8(_mm_min_epu8(v, below), v));
            if (_mm_movemask_epi8(hit))
                return 0;
        }
#endif
        for (; p < end; p++)
            if (*p < 0x20 || *p == '"' || *p == '\\')
                return 0;
        return 1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x20 || c == '"' || c == '\\')
            return 0;
    }
    return 1;
}

/* The JSON string of value, as encode (json's encode_basestring, ensure_ascii False) writes it: a str with nothing
 * to escape is itself between quotes. */
static int buf_string(Buf *w, PyObject *encode, PyObject *value) {
    PyObject *e;
    int rc;
    if (PyUnicode_CheckExact(value) && plain(value))
        return PUT(w, "\"") < 0 || buf_utf8(w, value) < 0 || PUT(w, "\"") < 0 ? -1 : 0;
    if ((e = PyObject_CallOneArg(encode, value)) == NULL)
        return -1;
    if (!PyUnicode_Check(e)) {
        Py_DECREF(e);
        PyErr_SetString(PyExc_TypeError, "encode gave no str");
        return -1;
    }
    rc = buf_utf8(w, e);
    Py_DECREF(e);
    return rc;
}

/* int.__repr__(grade): an int (a bool as its int) in decimal; TypeError for anything else, as int.__repr__ raises. */
static int buf_int(Buf *w, PyObject *grade) {
    long long v;
    int overflow;
    char digits[32];
    if (!PyLong_Check(grade)) {
        PyErr_Format(PyExc_TypeError, "a grade must be an int, not %.100s", Py_TYPE(grade)->tp_name);
        return -1;
    }
    v = PyLong_AsLongLongAndOverflow(grade, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        PyObject *r = PyLong_Type.tp_repr(grade);
        int rc = r == NULL ? -1 : buf_utf8(w, r);
        Py_XDECREF(r);
        return rc;
    }
    {
        char *p = digits + sizeof digits;
        unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
        do
            *--p = (char)('0' + u % 10);
        while (u /= 10);
        if (v < 0)
            *--p = '-';
        return buf_put(w, p, digits + sizeof digits - p);
    }
}

/* Whether any of the fields that make a case's row the long form is set (truthy); -1 on error. */
static int long_form(PyObject *c) {
    PyObject *names[] = {s_relevant_texts, s_expected_keywords, s_checks, s_paraphrases};
    for (size_t i = 0; i < 4; i++) {
        PyObject *v = attr(c, names[i]);
        int t;
        if (v == NULL)
            return -1;
        t = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (t)
            return t;
    }
    return 0;
}

/* The pairs of a dict of at most 16 str ids, sorted: its keys in order (distinct keys: (id, grade) pairs sort as their
 * ids do), then each written with its grade. 1: written; 0: not this kind of dict (the caller sorts its items); -1. */
static int buf_small_pairs(Buf *w, PyObject *encode, PyObject *relevant) {
    PyObject *keys[16], *grades[16], *k, *v;
    Py_ssize_t pos = 0, n = 0;
    if (!PyDict_CheckExact(relevant) || PyDict_GET_SIZE(relevant) > 16)
        return 0;
    while (PyDict_Next(relevant, &pos, &k, &v)) {
        Py_ssize_t j = n++;
        if (!PyUnicode_CheckExact(k))
            return 0;
        for (; j > 0; j--) { /* insertion sort: a few ids */
            int lt = PyUnicode_Compare(k, keys[j - 1]) < 0;
            if (PyErr_Occurred())
                return -1;
            if (!lt)
                break;
            keys[j] = keys[j - 1];
            grades[j] = grades[j - 1];
        }
        keys[j] = k;
        grades[j] = v;
    }
    int rc = 1;
    for (Py_ssize_t i = 0; i < n; i++) { /* held while encode (Python code) may run */
        Py_INCREF(keys[i]);
        Py_INCREF(grades[i]);
    }
    for (Py_ssize_t i = 0; i < n && rc == 1; i++)
        if ((i && PUT(w, ", ") < 0) || PUT(w, "[") < 0 || buf_string(w, encode, keys[i]) < 0 || PUT(w, ", ") < 0
            || buf_int(w, grades[i]) < 0 || PUT(w, "]") < 0)
            rc = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_DECREF(keys[i]);
        Py_DECREF(grades[i]);
    }
    return rc;
}

/* The pairs of a case's relevant ids and grades, sorted: [d, g], [d, g]. */
static int buf_pairs(Buf *w, PyObject *encode, PyObject *relevant) {
    int small = buf_small_pairs(w, encode, relevant);
    if (small != 0)
        return small < 0 ? -1 : 0;
    PyObject *items = PyDict_Check(relevant) ? PyDict_Items(relevant) : PyMapping_Items(relevant);
    int rc = -1;
    if (items == NULL || PyList_Sort(items) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *pair = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "relevant must give (id, grade) pairs");
            goto done;
        }
        if ((i && PUT(w, ", ") < 0) || PUT(w, "[") < 0 || buf_string(w, encode, PyTuple_GET_ITEM(pair, 0)) < 0
            || PUT(w, ", ") < 0 || buf_int(w, PyTuple_GET_ITEM(pair, 1)) < 0 || PUT(w, "]") < 0)
            goto done;
    }
    rc = 0;
done:
    Py_XDECREF(items);
    return rc;
}

/* One case's usual row and its newline: [id, question, ground truth or null, [pairs], type]. */
static int buf_row(Buf *w, PyObject *encode, PyObject *c) {
    PyObject *id = attr(c, s_id), *q = NULL, *gt = NULL, *rel = NULL, *type = NULL;
    int rc = -1;
    if (id == NULL || (q = attr(c, s_question)) == NULL || (gt = attr(c, s_ground_truth)) == NULL
        || (rel = attr(c, s_relevant)) == NULL || (type = attr(c, s_type)) == NULL)
        goto done;
    if (PUT(w, "[") < 0 || buf_string(w, encode, id) < 0 || PUT(w, ", ") < 0 || buf_string(w, encode, q) < 0
        || PUT(w, ", ") < 0 || (gt == Py_None ? PUT(w, "null") : buf_string(w, encode, gt)) < 0 || PUT(w, ", [") < 0
        || buf_pairs(w, encode, rel) < 0 || PUT(w, "], ") < 0 || buf_string(w, encode, type) < 0 || PUT(w, "]\n") < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(id), Py_XDECREF(q), Py_XDECREF(gt), Py_XDECREF(rel), Py_XDECREF(type);
    return rc;
}

/* fingerprint_utf8(cases, encode, long_row): the UTF-8 bytes of gate.core.cases.fingerprint's text of the cases (in
 * the order given): each case's row and a newline; encode is the JSON string encoder, long_row the row (a str) of a
 * case of the long form. */
static PyObject *fingerprint_utf8(PyObject *self, PyObject *args) {
    PyObject *cases, *encode, *long_row, *seq, *out = NULL;
    Buf w = {NULL, 0, 0};
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &cases, &encode, &long_row))
        return NULL;
    if ((seq = PySequence_Fast(cases, "cases must be a sequence")) == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *c = PySequence_Fast_GET_ITEM(seq, i), *row;
        int form = long_form(c), rc;
        if (form < 0)
            goto done;
        if (!form) {
            if (buf_row(&w, encode, c) < 0)
                goto done;
            continue;
        }
        if ((row = PyObject_CallOneArg(long_row, c)) == NULL)
            goto done;
        rc = PyUnicode_Check(row) ? buf_utf8(&w, row) : (PyErr_SetString(PyExc_TypeError, "long_row gave no str"), -1);
        Py_DECREF(row);
        if (rc < 0 || PUT(&w, "\n") < 0)
            goto done;
    }
    out = PyBytes_FromStringAndSize(w.b ? w.b : "", w.n);
done:
    Py_DECREF(seq);
    PyMem_Free(w.b);
    return out;
}

/* ---- the retrieval stage's loop over the cases (match.level exact) ---- */

static PyObject *s_answerable, *s_metrics, *s_relevant_ranks;

/* {"id": cid, "metrics": metrics (stolen), "error": error[, "relevant_ranks": ranks]}: a new reference, or NULL. */
static PyObject *sample_dict(PyObject *cid, PyObject *metrics, PyObject *error, PyObject *ranks) {
    PyObject *d = PyDict_New();
    if (d == NULL || PyDict_SetItem(d, s_id, cid) < 0 || PyDict_SetItem(d, s_metrics, metrics) < 0
        || PyDict_SetItem(d, s_error, error) < 0 || (ranks != NULL && PyDict_SetItem(d, s_relevant_ranks, ranks) < 0)) {
        Py_XDECREF(d);
        Py_DECREF(metrics);
        return NULL;
    }
    Py_DECREF(metrics);
    return d;
}

/* A sample of the stage: {"id": .., "metrics": {names: row}, "error": None, "relevant_ranks": ranks}. */
static PyObject *scored_sample(PyObject *cid, PyObject *names, PyObject *row, PyObject *ranks) {
    PyObject *metrics = PyDict_New();
    if (metrics == NULL)
        return NULL;
    if (PyList_GET_SIZE(row) != PyTuple_GET_SIZE(names)) {
        Py_DECREF(metrics);
        PyErr_SetString(PyExc_ValueError, "a row of another length than the names");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++)
        if (PyDict_SetItem(metrics, PyTuple_GET_ITEM(names, i), PyList_GET_ITEM(row, i)) < 0) {
            Py_DECREF(metrics);
            return NULL;
        }
    return sample_dict(cid, metrics, Py_None, ranks);
}

/* One answerable case: appends its sample (and its scored row), -1 on error. */
static int score_one(PyObject **ctx, PyObject *c, PyObject *cid, PyObject *out, PyObject *samples, PyObject *rows, PyObject *scored) {
    PyObject *plan = ctx[0], *names = ctx[1], *no_relevant = ctx[2], *fallback = ctx[3];
    PyObject *err = attr(out, s_error), *rel = NULL, *ret = NULL, *ids = NULL, *got = NULL, *sample = NULL, *one = NULL;
    PyObject *why = NULL;
    int rc = -1;
    if (err == NULL)
        return -1;
    if (err != Py_None) {
        why = err;
    } else {
        int empty;
        if ((rel = attr(c, s_relevant)) == NULL || (empty = PyObject_Not(rel)) < 0)
            goto done;
        why = empty ? no_relevant : NULL;
    }
    if (why != NULL) { /* the case's error, or why it cannot be scored */
        if (!PyUnicode_Check(why)) {
            PyErr_SetString(PyExc_TypeError, "a target output's error must be a str");
            goto done;
        }
        PyObject *none = PyDict_New();
        sample = none == NULL ? NULL : sample_dict(cid, none, why, NULL);
        rc = sample == NULL ? -1 : PyList_Append(samples, sample);
        goto done;
    }
    if ((ret = attr(out, s_retrieved)) == NULL || (ids = passage_ids(ret, -1)) == NULL)
        goto done;
    {
        PyObject *a[3] = {plan, ids, rel};
        got = score_case(NULL, a, 3);
    }
    if (got == Py_None) {
        Py_DECREF(got);
        got = PyObject_CallFunctionObjArgs(fallback, ids, rel, NULL);
    }
    if (got == NULL)
        goto done;
    if (!PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 3 || !PyList_Check(PyTuple_GET_ITEM(got, 2))) {
        PyErr_SetString(PyExc_TypeError, "a scorer gives (ranks, rank_list, row)");
        goto done;
    }
    {
        Py_ssize_t nrel = PyObject_Length(rel);
        PyObject *count = nrel < 0 ? NULL : PyLong_FromSsize_t(nrel);
        one = count == NULL ? NULL : PyTuple_Pack(3, PyTuple_GET_ITEM(got, 1), count, PyTuple_GET_ITEM(got, 2));
        Py_XDECREF(count);
    }
    if (one == NULL || PyObject_SetItem(scored, cid, one) < 0 || PyList_Append(rows, one) < 0)
        goto done;
    sample = scored_sample(cid, names, PyTuple_GET_ITEM(got, 2), PyTuple_GET_ITEM(got, 0));
    rc = sample == NULL ? -1 : PyList_Append(samples, sample);
done:
    Py_XDECREF(err), Py_XDECREF(rel), Py_XDECREF(ret), Py_XDECREF(ids), Py_XDECREF(got), Py_XDECREF(sample), Py_XDECREF(one);
    return rc;
}

/* Counts an unanswerable case by its type in excluded; -1 on error. */
static int exclude(PyObject *excluded, PyObject *type) {
    PyObject *n = PyDict_GetItemWithError(excluded, type), *m;
    int rc;
    if (n == NULL && PyErr_Occurred())
        return -1;
    if (n == NULL)
        m = PyLong_FromLong(1);
    else {
        Py_ssize_t count = PyLong_AsSsize_t(n);
        m = count == -1 && PyErr_Occurred() ? NULL : PyLong_FromSsize_t(count + 1);
    }
    if (m == NULL)
        return -1;
    rc = PyDict_SetItem(excluded, type, m);
    Py_DECREF(m);
    return rc;
}

/* score_cases(plan, names, cases, outputs, no_relevant, fallback): the retrieval stage's loop (match.level exact):
 * (samples, rows, scored, excluded) as gate.stages.retrieval.retrieval_stage builds them; fallback scores a case
 * score_case does not take. */
static PyObject *score_cases(PyObject *self, PyObject *args) {
    PyObject *ctx[4], *cases, *outputs, *samples = PyList_New(0), *rows = PyList_New(0), *scored = PyDict_New();
    PyObject *excluded = PyDict_New(), *it = NULL, *c;
    (void)self;
    if (samples == NULL || rows == NULL || scored == NULL || excluded == NULL
        || !PyArg_ParseTuple(args, "O!O!OOOO", &PyTuple_Type, &ctx[0], &PyTuple_Type, &ctx[1], &cases, &outputs, &ctx[2], &ctx[3])
        || (it = PyObject_GetIter(cases)) == NULL)
        goto fail;
    while ((c = PyIter_Next(it)) != NULL) {
        PyObject *cid = attr(c, s_id), *out = NULL, *type = NULL;
        int bad = cid == NULL || (out = PyObject_GetItem(outputs, cid)) == NULL || (type = attr(c, s_type)) == NULL;
        if (!bad) {
            int answerable = PyObject_RichCompareBool(type, s_answerable, Py_EQ);
            bad = answerable < 0 || (answerable ? score_one(ctx, c, cid, out, samples, rows, scored) : exclude(excluded, type)) < 0;
        }
        Py_XDECREF(cid), Py_XDECREF(out), Py_XDECREF(type);
        Py_DECREF(c);
        if (bad)
            goto fail;
    }
    if (PyErr_Occurred())
        goto fail;
    Py_DECREF(it);
    return Py_BuildValue("(NNNN)", samples, rows, scored, excluded);
fail:
    Py_XDECREF(it), Py_XDECREF(samples), Py_XDECREF(rows), Py_XDECREF(scored), Py_XDECREF(excluded);
    return NULL;
}

/* 0: every float in x (through dicts, lists and tuples; str, int, bool, None aside) is finite; 1: one is NaN or
 * infinite; 2: x holds something else (or is nested deeper than 100), which only an encoder can tell. */
static int floats_in(PyObject *x, int depth) {
    if (x == Py_None || PyUnicode_CheckExact(x) || PyLong_CheckExact(x) || PyBool_Check(x))
        return 0;
    if (PyFloat_CheckExact(x))
        return !isfinite(PyFloat_AS_DOUBLE(x));
    if (depth > 100)
        return 2;
    if (PyDict_CheckExact(x)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        int worst = 0;
        while (PyDict_Next(x, &pos, &k, &v)) {
            int a, b;
            if (PyUnicode_CheckExact(k) && (PyUnicode_CheckExact(v) || v == Py_None)) /* a row's text fields */
                continue;
            a = floats_in(k, depth + 1);
            b = a == 1 ? 1 : floats_in(v, depth + 1);
            if (a == 1 || b == 1)
                return 1;
            worst = a > worst ? a : b > worst ? b : worst;
        }
        return worst;
    }
    if (PyList_CheckExact(x) || PyTuple_CheckExact(x)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(x);
        PyObject **items = PySequence_Fast_ITEMS(x);
        int worst = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int a;
            if (PyUnicode_CheckExact(items[i]) || items[i] == Py_None) /* a list of ids: no call for each */
                continue;
            if ((a = floats_in(items[i], depth + 1)) == 1)
                return 1;
            worst = a > worst ? a : worst;
        }
        return worst;
    }
    return 2;
}

/* not_finite(x): True when x holds a NaN or an infinite float, False when it holds none, None when it cannot tell. */
static PyObject *not_finite(PyObject *self, PyObject *x) {
    int got = floats_in(x, 0);
    (void)self;
    if (got == 2)
        Py_RETURN_NONE;
    return PyBool_FromLong(got);
}

/* A new cls whose slots (their member descriptors, in order) hold the n values, without calling __init__ (NULL: error).
 * Also gate.core._native's part two (_ranked.c) builds with it. */
PyObject *build_slots(PyTypeObject *cls, PyObject *slots, PyObject *const *values, Py_ssize_t n) {
    PyObject *obj;
    if (!PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != n) {
        PyErr_SetString(PyExc_ValueError, "as many values as slots");
        return NULL;
    }
    if ((obj = cls->tp_alloc(cls, 0)) == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = PyTuple_GET_ITEM(slots, i);
        descrsetfunc set = Py_TYPE(d)->tp_descr_set;
        if (set == NULL || set(d, obj, values[i]) < 0) {
            if (set == NULL)
                PyErr_SetString(PyExc_TypeError, "not a slot's descriptor");
            Py_DECREF(obj);
            return NULL;
        }
    }
    return obj;
}

/* build(cls, slots, values): a new cls whose slots (their member descriptors, in order) hold values, without calling
 * __init__: for a frozen slotted dataclass built from values already checked (gate.io.golden's usual rows). */
static PyObject *build(PyObject *self, PyObject *args) {
    PyTypeObject *cls;
    PyObject *slots, *values;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyType_Type, &cls, &PyTuple_Type, &slots, &PyTuple_Type, &values))
        return NULL;
    return build_slots(cls, slots, &PyTuple_GET_ITEM(values, 0), PyTuple_GET_SIZE(values));
}

/* ---- a golden set's usual rows, decoded by msgspec in one call, made into their cases ---- */

static PyObject *s_relevant_doc_ids, *s_category, *s_tags;

/* Whether a str is empty or all whitespace (what ``not text.strip()`` says). */
static int blank(PyObject *text) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i)))
            return 0;
    return 1;
}

/* A row's relevant ids as gate.io.golden._case_of reads them: a new dict (a list's ids graded 1; a dict itself, its
 * grades from 1 to max_grade), Py_None (a new reference) when the row is not taken, NULL on error. */
static PyObject *relevant_of(PyObject *rel, long long max_grade) {
    if (rel == Py_None)
        return PyDict_New();
    if (PyList_CheckExact(rel)) {
        PyObject *out = PyDict_New(), *one = PyLong_FromLong(1);
        for (Py_ssize_t i = 0; out != NULL && one != NULL && i < PyList_GET_SIZE(rel); i++) {
            PyObject *id = PyList_GET_ITEM(rel, i);
            int empty = PyObject_Not(id);
            if (empty != 0) { /* an empty id: not taken (or an error) */
                Py_CLEAR(out);
                Py_XDECREF(one);
                if (empty < 0)
                    return NULL;
                Py_RETURN_NONE;
            }
            if (PyDict_SetItem(out, id, one) < 0)
                Py_CLEAR(out);
        }
        Py_XDECREF(one);
        return out;
    }
    if (PyDict_CheckExact(rel)) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(rel, &pos, &key, &value)) {
            long long g;
            int overflow;
            if (!PyUnicode_Check(key) || PyUnicode_GET_LENGTH(key) == 0 || !PyLong_CheckExact(value))
                Py_RETURN_NONE;
            g = PyLong_AsLongLongAndOverflow(value, &overflow);
            if (g == -1 && PyErr_Occurred())
                return NULL;
            if (overflow || g < 1 || g > max_grade)
                Py_RETURN_NONE;
        }
        Py_INCREF(rel);
        return rel;
    }
    Py_RETURN_NONE;
}

/* One row's case (a new reference), Py_None when not taken, NULL on error. */
static PyObject *case_of(PyObject *row, Py_ssize_t lineno, PyObject **ctx, long long max_grade) {
    PyObject *cls = ctx[0], *slots = ctx[1], *types = ctx[2], *derive = ctx[3], *factory = ctx[4], *tail = ctx[5];
    PyObject *v[32] = {NULL}, *out = NULL, *tags = NULL;
    Py_ssize_t ntail = PyTuple_GET_SIZE(tail), n = 8 + (factory != Py_None) + ntail;
    int in;
    if (n > 32 || PyTuple_GET_SIZE(slots) != n) {
        PyErr_SetString(PyExc_TypeError, "slots must hold the usual fields and the rest, at most 32");
        return NULL;
    }
    /* id, question, line, ground_truth, relevant, type, tags, category, then the rest */
    if ((v[1] = attr(row, s_question)) == NULL || (v[0] = attr(row, s_id)) == NULL || (v[5] = attr(row, s_type)) == NULL
        || (v[4] = attr(row, s_relevant_doc_ids)) == NULL || (v[3] = attr(row, s_ground_truth)) == NULL
        || (v[7] = attr(row, s_category)) == NULL || (tags = attr(row, s_tags)) == NULL)
        goto done;
    if (!PyUnicode_Check(v[1]) || blank(v[1]) || !PyUnicode_Check(v[5]) || (in = PySequence_Contains(types, v[5])) == 0)
        goto not_taken;
    if (in < 0)
        goto done;
    if (v[0] == Py_None) {
        Py_SETREF(v[0], PyObject_CallOneArg(derive, v[1]));
        if (v[0] == NULL)
            goto done;
    } else if (!PyUnicode_Check(v[0]) || blank(v[0]))
        goto not_taken;
    Py_SETREF(v[4], relevant_of(v[4], max_grade));
    if (v[4] == NULL)
        goto done;
    if (v[4] == Py_None)
        goto not_taken;
    if (PyDict_GET_SIZE(v[4]) == 0 && PyUnicode_CompareWithASCIIString(v[5], "answerable") == 0)
        goto not_taken;
    if ((v[2] = PyLong_FromSsize_t(lineno)) == NULL)
        goto done;
    if (tags != Py_None && !PyList_Check(tags))
        goto not_taken;
    v[6] = tags != Py_None && PyList_GET_SIZE(tags) ? PyList_AsTuple(tags) : PyTuple_New(0);
    if (v[6] == NULL)
        goto done;
    if (factory != Py_None && (v[8] = PyObject_CallNoArgs(factory)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < ntail; i++) {
        v[n - ntail + i] = PyTuple_GET_ITEM(tail, i);
        Py_INCREF(v[n - ntail + i]);
    }
    out = build_slots((PyTypeObject *)cls, slots, v, n);
    goto done;
not_taken:
    out = Py_None;
    Py_INCREF(out);
done:
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(v[i]);
    Py_XDECREF(tags);
    return out;
}

/* cases_of_rows(rows, cls, slots, types, derive, factory, tail, max_grade): gate.io.golden._case_of of every row
 * (row i is line i + 1), built into cls's slots (the usual fields, then factory() unless it is None, then tail);
 * None as soon as a row is not taken (the file is then read line by line, which says why). */
static PyObject *cases_of_rows(PyObject *self, PyObject *args) {
    PyObject *rows, *ctx[6], *out;
    long long max_grade;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOO!L", &PyList_Type, &rows, &PyType_Type, &ctx[0], &PyTuple_Type, &ctx[1], &ctx[2],
                          &ctx[3], &ctx[4], &PyTuple_Type, &ctx[5], &max_grade))
        return NULL;
    if ((out = PyList_New(PyList_GET_SIZE(rows))) == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rows); i++) {
        PyObject *c = case_of(PyList_GET_ITEM(rows, i), i + 1, ctx, max_grade);
        if (c == NULL || c == Py_None) {
            Py_DECREF(out);
            return c;
        }
        PyList_SET_ITEM(out, i, c);
    }
    return out;
}

static PyObject *s_answer, *s_latency_ms;

/* report_cases(cases, outputs): gate.run.evaluate's rows of report["cases"], one a case in order: {"id": c.id, "type":
 * c.type, "retrieved": [d.id for d in out.retrieved], "answer": out.answer, "latency_ms": out.latency_ms, "error":
 * out.error} of out = outputs[c.id] (a KeyError as outputs[c.id] raises it). */
static PyObject *report_cases(PyObject *self, PyObject *args) {
    PyObject *cases, *outputs, *seq, *rows;
    PyObject *const keys[6] = {s_id, s_type, s_retrieved, s_answer, s_latency_ms, s_error};
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &cases, &outputs) || (seq = PySequence_Fast(cases, "cases must be a sequence")) == NULL)
        return NULL;
    if ((rows = PyList_New(PySequence_Fast_GET_SIZE(seq))) == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *c = PySequence_Fast_GET_ITEM(seq, i), *v[6] = {NULL}, *out = NULL, *ret = NULL, *row = NULL;
        int ok = (v[0] = attr(c, s_id)) != NULL && (v[1] = attr(c, s_type)) != NULL
                 && (out = PyObject_GetItem(outputs, v[0])) != NULL && (ret = attr(out, s_retrieved)) != NULL
                 && (v[2] = passage_ids(ret, -1)) != NULL && (v[3] = attr(out, s_answer)) != NULL
                 && (v[4] = attr(out, s_latency_ms)) != NULL && (v[5] = attr(out, s_error)) != NULL
                 && (row = PyDict_New()) != NULL;
        for (int k = 0; ok && k < 6; k++)
            ok = PyDict_SetItem(row, keys[k], v[k]) == 0;
        for (int k = 0; k < 6; k++)
            Py_XDECREF(v[k]);
        Py_XDECREF(out);
        Py_XDECREF(ret);
        if (!ok) {
            Py_XDECREF(row);
            Py_DECREF(rows);
            Py_DECREF(seq);
            return NULL;
        }
        PyList_SET_ITEM(rows, i, row);
    }
    Py_DECREF(seq);
    return rows;
}

/* retrieved_ids(retrieved): [d.id for d in retrieved]. */
static PyObject *retrieved_ids(PyObject *self, PyObject *retrieved) {
    (void)self;
    return passage_ids(retrieved, -1);
}

PyObject *scan_ranked(PyObject *self, PyObject *arg);   /* _ranked.c */
PyObject *build_ranked(PyObject *self, PyObject *args);
PyObject *ranked_outputs(PyObject *self, PyObject *args);

static PyMethodDef methods[] = {
    {"score_case", (PyCFunction)(void (*)(void))score_case, METH_FASTCALL,
     "score_case(plan, ids, relevant) -> (ranks, rank_list, row), or None when the Python scorer must run."},
    {"one_value_a_line", one_value_a_line, METH_O,
     "one_value_a_line(raw) -> (lines or None, whether raw is valid UTF-8)."},
    {"near_ids", near_ids, METH_VARARGS, "near_ids(cases, outputs) -> [(case id, id retrieved, relevant id)]."},
    {"unsorted_scores", unsorted_scores, METH_VARARGS, "unsorted_scores(cases, outputs) -> (count, first case id or None)."},
    {"clearly_fresh", clearly_fresh, METH_VARARGS, "clearly_fresh(answered, outputs, cutoff) -> bool."},
    {"fingerprint_utf8", fingerprint_utf8, METH_VARARGS, "fingerprint_utf8(cases, encode, long_row) -> the UTF-8 of the text hashed."},
    {"score_cases", score_cases, METH_VARARGS, "score_cases(plan, names, cases, outputs, no_relevant, fallback)."},
    {"build", build, METH_VARARGS, "build(cls, slots, values) -> a new cls whose slots hold values (no __init__)."},
    {"not_finite", not_finite, METH_O, "not_finite(x) -> whether x holds a NaN or infinity; None: cannot tell."},
    {"cases_of_rows", cases_of_rows, METH_VARARGS,
     "cases_of_rows(rows, cls, slots, types, derive, factory, tail, max_grade) -> [case], or None."},
    {"retrieved_ids", retrieved_ids, METH_O, "retrieved_ids(retrieved) -> [d.id for d in retrieved]."},
    {"report_cases", report_cases, METH_VARARGS, "report_cases(cases, outputs) -> report[\"cases\"]'s rows."},
    {"scan_ranked", scan_ranked, METH_O, "scan_ranked(raw) -> a results file of ranked ids read (a capsule), or None."},
    {"build_ranked", build_ranked, METH_VARARGS, "build_ranked(scanned, line_cls, passage_cls, decode) -> rows, or None."},
    {"ranked_outputs", ranked_outputs, METH_VARARGS,
     "ranked_outputs(scanned, passage_cls, decode, known, out_cls, out_slots, rest, max_latency) -> {case id: output}, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "gate.core._native", NULL, 0, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    const char *names[] = {"id", "relevant", "error", "retrieved", "score", "get", "strip", "casefold", "relevant_texts",
                           "expected_keywords", "checks", "paraphrases", "question", "ground_truth", "type",
                           "answerable", "metrics", "relevant_ranks", "relevant_doc_ids", "category", "tags", "answer", "latency_ms"};
    PyObject **slots[] = {&s_id, &s_relevant, &s_error, &s_retrieved, &s_score, &s_get, &s_strip, &s_casefold,
                          &s_relevant_texts, &s_expected_keywords, &s_checks, &s_paraphrases, &s_question, &s_ground_truth,
                          &s_type, &s_answerable, &s_metrics, &s_relevant_ranks, &s_relevant_doc_ids, &s_category, &s_tags, &s_answer,
                          &s_latency_ms};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && ranked_ready(m) < 0)
        Py_CLEAR(m);
    return m;
}
