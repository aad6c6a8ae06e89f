"""GF(2^8) arithmetic and the small matrices of the RS code. Pure Python; runs once per (k, m)
or per decode pattern, never per byte of data.

The field and the code are reedsolo's defaults (primitive polynomial 0x11d, generator 2,
first consecutive root 0), which ISA-L's tables use too, so parity is byte-identical across
reedsolo, the numpy backend and ISA-L.
"""

from __future__ import annotations

from functools import lru_cache

PRIM = 0x11D
GENERATOR = 2

Matrix = tuple[tuple[int, ...], ...]


def _build_tables() -> tuple[list[int], list[int]]:
    exp = [0] * 512
    log = [0] * 256
    x = 1
    for i in range(255):
        exp[i] = x
        log[x] = i
        x <<= 1  # multiply by the generator, 2
        if x & 0x100:
            x ^= PRIM
    for i in range(255, 512):
        exp[i] = exp[i - 255]
    return exp, log


EXP, LOG = _build_tables()


def mul(a: int, b: int) -> int:
    if a == 0 or b == 0:
        return 0
    return EXP[LOG[a] + LOG[b]]


def inverse(a: int) -> int:
    if a == 0:
        raise ZeroDivisionError("0 has no inverse in GF(2^8)")
    return EXP[255 - LOG[a]]


def _poly_mul(p: list[int], q: list[int]) -> list[int]:
    out = [0] * (len(p) + len(q) - 1)
    for i, a in enumerate(p):
        for j, b in enumerate(q):
            out[i + j] ^= mul(a, b)
    return out


@lru_cache(maxsize=None)
def generator_matrix(k: int, m: int) -> Matrix:
    """The m x k matrix G with parity = G . data, column by column.

    Row i is parity byte i of ``reedsolo.RSCodec(m).encode(data)[k:]``: the remainder of
    data(x) * x^m divided by g(x) = (x - 2^0)(x - 2^1)...(x - 2^(m-1)), data byte 0 being the
    highest power. The code is linear, so column j is the remainder for the unit vector e_j.
    """
    if k < 1 or m < 1 or k + m > 255:
        raise ValueError(f"RS({k},{m}) is not a valid code over GF(2^8)")
    gen = [1]
    for i in range(m):
        gen = _poly_mul(gen, [1, EXP[i]])
    columns = []
    for j in range(k):
        msg = [0] * (k + m)
        msg[j] = 1
        for i in range(k):  # synthetic division, as reedsolo.rs_encode_msg does it
            coef = msg[i]
            if coef:
                for d in range(1, len(gen)):
                    msg[i + d] ^= mul(gen[d], coef)
        columns.append(msg[k:])
    return tuple(tuple(columns[j][i] for j in range(k)) for i in range(m))


def invert(matrix: Matrix) -> Matrix:
    """Inverse of a square matrix over GF(2^8) (Gauss-Jordan); ValueError if singular."""
    n = len(matrix)
    rows = [list(row) + [int(i == r) for i in range(n)] for r, row in enumerate(matrix)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if rows[r][col]), None)
        if pivot is None:
            raise ValueError("singular matrix")
        rows[col], rows[pivot] = rows[pivot], rows[col]
        scale = inverse(rows[col][col])
        rows[col] = [mul(scale, v) for v in rows[col]]
        for r in range(n):
            factor = rows[r][col]
            if r != col and factor:
                rows[r] = [v ^ mul(factor, p) for v, p in zip(rows[r], rows[col])]
    return tuple(tuple(row[n:]) for row in rows)


def encoding_row(k: int, m: int, unit: int) -> tuple[int, ...]:
    """Row ``unit`` of the (k+m) x k systematic encoding matrix [I; G]."""
    if unit < k:
        return tuple(int(j == unit) for j in range(k))
    return generator_matrix(k, m)[unit - k]


@lru_cache(maxsize=4096)
def decode_matrix(k: int, m: int, survivors: tuple[int, ...], want: tuple[int, ...]) -> Matrix:
    """Rows that turn the k ``survivors`` (unit indices, in that order) into the ``want`` units.

    With A the k x k rows of [I; G] for the survivors, data = A^-1 . survivors, so a data unit w
    is row w of A^-1 and a parity unit k+i is G_i . A^-1.
    """
    if len(survivors) != k:
        raise ValueError(f"need {k} survivors, got {len(survivors)}")
    a_inv = invert(tuple(encoding_row(k, m, u) for u in survivors))
    rows = []
    for w in want:
        row = encoding_row(k, m, w)
        out = [0] * k
        for i, coef in enumerate(row):
            if coef:
                for j in range(k):
                    out[j] ^= mul(coef, a_inv[i][j])
        rows.append(tuple(out))
    return tuple(rows)


# --- spans and solutions, for codes that are not MDS (ec/lrc.py) ---------------------------


class Basis:
    """An echelon basis of a growing set of rows over GF(2^8): is a row in their span, and does
    adding one raise the rank? Rows are tuples of equal length."""

    def __init__(self) -> None:
        self._rows: list[tuple[int, list[int]]] = []   # (pivot column, row scaled to 1 there)

    def __len__(self) -> int:
        return len(self._rows)

    def _reduce(self, row) -> list[int]:
        out = list(row)
        for pivot, basis_row in self._rows:
            factor = out[pivot]
            if factor:
                out = [v ^ mul(factor, b) for v, b in zip(out, basis_row)]
        return out

    def spans(self, row) -> bool:
        return not any(self._reduce(row))

    def add(self, row) -> bool:
        """Add ``row``; False (and nothing changes) if it is already in the span."""
        out = self._reduce(row)
        pivot = next((c for c, v in enumerate(out) if v), None)
        if pivot is None:
            return False
        scale = inverse(out[pivot])
        out = [mul(scale, v) for v in out]
        for i, (p, basis_row) in enumerate(self._rows):   # keep the basis reduced
            factor = basis_row[pivot]
            if factor:
                self._rows[i] = (p, [v ^ mul(factor, b) for v, b in zip(basis_row, out)])
        self._rows.append((pivot, out))
        return True


def rank(rows) -> int:
    basis = Basis()
    for row in rows:
        basis.add(row)
    return len(basis)


def combination(sources: Matrix, targets: Matrix) -> Matrix | None:
    """For each target row t, coefficients c (one per source row) with sum_i c_i * sources[i] = t;
    None if some target is not in the sources' span. Gauss-Jordan on the transposed system."""
    n, width = len(sources), len(targets[0]) if targets else 0
    # Equations: one per column j: sum_i c_i * sources[i][j] = t[j], for every target at once.
    rows = [[sources[i][j] for i in range(n)] + [t[j] for t in targets] for j in range(width)]
    pivots: list[int] = []
    r = 0
    for col in range(n):
        p = next((i for i in range(r, width) if rows[i][col]), None)
        if p is None:
            continue
        rows[r], rows[p] = rows[p], rows[r]
        scale = inverse(rows[r][col])
        rows[r] = [mul(scale, v) for v in rows[r]]
        for i in range(width):
            factor = rows[i][col]
            if i != r and factor:
                rows[i] = [v ^ mul(factor, b) for v, b in zip(rows[i], rows[r])]
        pivots.append(col)
        r += 1
    if any(any(row[n:]) for row in rows[r:]):
        return None   # an equation 0 = nonzero: some target is outside the span
    out = []
    for t in range(len(targets)):
        coef = [0] * n
        for i, col in enumerate(pivots):
            coef[col] = rows[i][n + t]   # free variables stay 0
        out.append(tuple(coef))
    return tuple(out)
