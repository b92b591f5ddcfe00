#!/usr/bin/env python3
"""Convert a flat Parquet file to CSV using only the Python standard library.

Usage: python3 scripts/parquet2csv.py [--repr-floats] IN.parquet OUT.csv[.gz]

Written for the published per-operation traces (parquet-cpp-arrow via pandas),
so it supports what those files use and fails loudly on anything else:
  * flat schemas (REQUIRED / OPTIONAL columns; no nesting or repetition)
  * physical types BOOLEAN, INT32, INT64, FLOAT, DOUBLE, BYTE_ARRAY (UTF-8),
    FIXED_LEN_BYTE_ARRAY (hex); logical INT(8/16/32/64, signed/unsigned), STRING
  * codecs UNCOMPRESSED, SNAPPY (own decoder below), GZIP (zlib)
  * data pages v1 and v2, dictionary pages
  * encodings PLAIN, PLAIN_DICTIONARY / RLE_DICTIONARY, RLE definition levels

Output: a header row of the column names, one row per record, integers as
integers, strings as-is, nulls (and NaN) as empty fields, RFC 4180 quoting only
where needed, '\\n' line endings; OUT is gzipped when its name ends in .gz.
Floats are the decoded value (float32 widened exactly to float64) written with
the shortest round-trip digits, laid out as ECMAScript's Number-to-String does
(0 not 0.0, 0.0000463 not 4.63e-05, exponent only below 1e-6 or from 1e21):
this reproduces the repository's data/external/bytedance-st-pp4/trace-ST.csv.gz
byte for byte.  --repr-floats writes Python's repr() instead (as pandas does).
"""
import csv
import gzip
import os
import struct
import sys
import zlib


class ParquetError(Exception):
    pass


# Names of parquet.thrift enum values, for error messages.
PTYPES = ['BOOLEAN', 'INT32', 'INT64', 'INT96', 'FLOAT', 'DOUBLE', 'BYTE_ARRAY',
          'FIXED_LEN_BYTE_ARRAY']
ENCODINGS = ['PLAIN', 'GROUP_VAR_INT', 'PLAIN_DICTIONARY', 'RLE', 'BIT_PACKED',
             'DELTA_BINARY_PACKED', 'DELTA_LENGTH_BYTE_ARRAY', 'DELTA_BYTE_ARRAY',
             'RLE_DICTIONARY', 'BYTE_STREAM_SPLIT']


# --------------------------------------------------------------------------
# Thrift compact protocol: a generic reader that returns each struct as a
# {field id: value} dict.  The Parquet structs are interpreted by field id
# (see parquet.thrift) where they are used.
# --------------------------------------------------------------------------
class Thrift:
    def __init__(self, buf, pos=0):
        self.buf, self.pos = buf, pos

    def byte(self):
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self):
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def zigzag(self):
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, ttype):
        if ttype in (1, 2):                 # BOOL inside a container: one byte
            return self.byte() == 1
        if ttype == 3:                      # i8
            b = self.byte()
            return b - 256 if b > 127 else b
        if ttype in (4, 5, 6):              # i16 / i32 / i64: zigzag varint
            return self.zigzag()
        if ttype == 7:                      # double
            self.pos += 8
            return struct.unpack_from('<d', self.buf, self.pos - 8)[0]
        if ttype == 8:                      # binary / string
            n = self.varint()
            self.pos += n
            return bytes(self.buf[self.pos - n:self.pos])
        if ttype in (9, 10):                # list / set
            head = self.byte()
            size, etype = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            return [self.value(etype) for _ in range(size)]
        if ttype == 11:                     # map
            size = self.varint()
            if not size:
                return {}
            kv = self.byte()
            return dict((self.value(kv >> 4), self.value(kv & 0x0F))
                        for _ in range(size))
        if ttype == 12:
            return self.struct()
        raise ParquetError('thrift: unknown compact type %d' % ttype)

    def struct(self):
        fields, last = {}, 0
        while True:
            head = self.byte()
            if head == 0:                   # STOP
                return fields
            delta, ttype = head >> 4, head & 0x0F
            fid = last + delta if delta else self.zigzag()
            # Booleans in a struct carry their value in the type nibble.
            fields[fid] = (ttype == 1) if ttype in (1, 2) else self.value(ttype)
            last = fid


# --------------------------------------------------------------------------
# Snappy raw format (https://github.com/google/snappy/blob/main/format_description.txt)
# --------------------------------------------------------------------------
def snappy_decompress(src):
    t = Thrift(src)                         # reuse its varint reader
    length = t.varint()
    pos, out = t.pos, bytearray()
    n = len(src)
    while pos < n:
        tag = src[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:                       # literal
            size = tag >> 2
            if size >= 60:                  # length in the next 1-4 bytes
                nb = size - 59
                size = int.from_bytes(src[pos:pos + nb], 'little')
                pos += nb
            size += 1
            out += src[pos:pos + size]
            pos += size
            continue
        if kind == 1:                       # copy, 1-byte offset
            size = ((tag >> 2) & 7) + 4
            offset = ((tag >> 5) << 8) | src[pos]
            pos += 1
        elif kind == 2:                     # copy, 2-byte offset
            size = (tag >> 2) + 1
            offset = src[pos] | (src[pos + 1] << 8)
            pos += 2
        else:                               # copy, 4-byte offset
            size = (tag >> 2) + 1
            offset = int.from_bytes(src[pos:pos + 4], 'little')
            pos += 4
        start = len(out) - offset
        if offset <= 0 or start < 0:
            raise ParquetError('snappy: bad copy offset %d' % offset)
        if offset >= size:
            out += out[start:start + size]
        else:                               # overlapping copy repeats a pattern
            pattern = out[start:]
            out += (pattern * (size // offset + 1))[:size]
    if len(out) != length:
        raise ParquetError('snappy: got %d bytes, expected %d' % (len(out), length))
    return bytes(out)


def decompress(codec, data):
    if codec == 0:
        return bytes(data)
    if codec == 1:
        return snappy_decompress(data)
    if codec == 2:
        return zlib.decompress(data, 47)    # gzip or zlib header
    names = {3: 'LZO', 4: 'BROTLI', 5: 'LZ4', 6: 'ZSTD', 7: 'LZ4_RAW'}
    raise ParquetError('unsupported compression codec %s' % names.get(codec, codec))


# --------------------------------------------------------------------------
# Value encodings
# --------------------------------------------------------------------------
def rle_hybrid(buf, pos, end, bit_width, count):
    """Decode `count` values of the RLE/bit-packed hybrid encoding from buf[pos:end]."""
    out = []
    mask = (1 << bit_width) - 1
    vbytes = (bit_width + 7) // 8
    t = Thrift(buf, pos)
    while len(out) < count:
        if t.pos >= end:
            raise ParquetError('RLE data ends after %d of %d values' % (len(out), count))
        header = t.varint()
        if header & 1:                      # bit-packed: groups of 8 values
            groups = header >> 1
            nbytes = groups * bit_width
            bits = int.from_bytes(buf[t.pos:t.pos + nbytes], 'little')
            t.pos += nbytes
            out.extend((bits >> (i * bit_width)) & mask for i in range(groups * 8))
        else:                               # run of one repeated value
            value = int.from_bytes(buf[t.pos:t.pos + vbytes], 'little')
            t.pos += vbytes
            out.extend([value] * (header >> 1))
    return out[:count]


def plain(buf, pos, ptype, count, type_length):
    """Decode `count` PLAIN-encoded values of physical type `ptype`."""
    fmt = {1: 'i', 2: 'q', 4: 'f', 5: 'd'}.get(ptype)
    if fmt:
        return list(struct.unpack_from('<%d%s' % (count, fmt), buf, pos))
    if ptype == 0:                          # BOOLEAN: bit-packed, LSB first
        return [bool((buf[pos + i // 8] >> (i % 8)) & 1) for i in range(count)]
    if ptype == 6:                          # BYTE_ARRAY: 4-byte length prefix
        out = []
        for _ in range(count):
            n = struct.unpack_from('<I', buf, pos)[0]
            out.append(bytes(buf[pos + 4:pos + 4 + n]))
            pos += 4 + n
        return out
    if ptype == 7:                          # FIXED_LEN_BYTE_ARRAY
        return [bytes(buf[pos + i * type_length:pos + (i + 1) * type_length])
                for i in range(count)]
    raise ParquetError('unsupported physical type %s' % PTYPES[ptype])


# --------------------------------------------------------------------------
# Schema
# --------------------------------------------------------------------------


class Column:
    """One leaf column of a flat schema (a parquet SchemaElement)."""

    def __init__(self, el):
        self.name = el[4].decode('utf-8')
        if el.get(5):
            raise ParquetError('column %r: nested schemas are not supported' % self.name)
        if el.get(3) == 2:
            raise ParquetError('column %r: REPEATED columns are not supported' % self.name)
        self.ptype = el[1]
        self.type_length = el.get(2, 0)
        self.max_def = 1 if el.get(3) == 1 else 0   # OPTIONAL -> one level
        self.convert = self._converter(el.get(6), el.get(10, {}))

    def _converter(self, converted, logical):
        """Function mapping a decoded physical value to its output value."""
        name, pt = self.name, self.ptype
        unsigned = False
        if 10 in logical:                   # LogicalType.INTEGER (IntType)
            unsigned = not logical[10].get(2, True)
        elif 1 in logical or 4 in logical or 12 in logical:
            pass                            # STRING, ENUM, JSON: UTF-8 text
        elif logical:
            raise ParquetError('column %r: unsupported logical type %r' % (name, sorted(logical)))
        elif converted is not None:
            if 11 <= converted <= 14:       # UINT_8 .. UINT_64
                unsigned = True
            elif converted not in (0, 4, 19) and not 15 <= converted <= 18:
                raise ParquetError('column %r: unsupported converted type %d' % (name, converted))
        if unsigned and pt in (1, 2):
            bits = 32 if pt == 1 else 64
            return lambda v: v & ((1 << bits) - 1)
        if pt == 6:
            return lambda v: v.decode('utf-8')
        if pt == 7:
            return lambda v: v.hex()
        return None                         # use the value as decoded


# --------------------------------------------------------------------------
# Column chunks and pages
# --------------------------------------------------------------------------
def read_chunk(data, col, meta):
    """Return the list of values (None for nulls) of one column chunk."""
    codec, total = meta[4], meta[5]
    pos = meta[9]                           # first data page, unless a
    if meta.get(11):                        # dictionary page precedes it
        pos = min(pos, meta[11])
    dictionary, values = None, []
    while len(values) < total:
        t = Thrift(data, pos)
        header = t.struct()
        body = data[t.pos:t.pos + header[3]]
        pos = t.pos + header[3]
        ptype = header[1]
        if ptype == 2:                      # DICTIONARY_PAGE
            dh = header[7]
            if dh.get(2, 0) not in (0, 2):
                raise ParquetError('column %r: dictionary encoding %d' % (col.name, dh[2]))
            page = decompress(codec, body)
            dictionary = plain(page, 0, col.ptype, dh[1], col.type_length)
            if col.convert:
                dictionary = [col.convert(v) for v in dictionary]
            continue
        if ptype == 0:                      # DATA_PAGE (v1)
            dh = header[5]
            n, encoding = dh[1], dh[2]
            page = decompress(codec, body)
            p = 0
            if col.max_def:
                if dh.get(3, 3) != 3:
                    raise ParquetError('column %r: def-level encoding %d' % (col.name, dh[3]))
                size = struct.unpack_from('<I', page, 0)[0]
                defs = rle_hybrid(page, 4, 4 + size, 1, n)
                p = 4 + size
        elif ptype == 3:                    # DATA_PAGE_V2: levels stay uncompressed
            dh = header[8]
            n, encoding = dh[1], dh[4]
            dlen, rlen = dh[5], dh[6]
            if rlen:
                raise ParquetError('column %r: repetition levels present' % col.name)
            levels, rest = body[:dlen], body[dlen:]
            page = decompress(codec, rest) if dh.get(7, True) else bytes(rest)
            p = 0
            if col.max_def:
                defs = rle_hybrid(levels, 0, dlen, 1, n)
        else:                               # INDEX_PAGE or unknown: skip
            continue
        present = sum(defs) if col.max_def else n
        if encoding == 0:                   # PLAIN
            vals = plain(page, p, col.ptype, present, col.type_length)
            if col.convert:
                vals = [col.convert(v) for v in vals]
        elif encoding in (2, 8):            # PLAIN_DICTIONARY / RLE_DICTIONARY
            if dictionary is None:
                raise ParquetError('column %r: dictionary page missing' % col.name)
            idx = rle_hybrid(page, p + 1, len(page), page[p], present) if present else []
            vals = [dictionary[i] for i in idx]
        elif encoding == 3 and col.ptype == 0:  # RLE booleans, length-prefixed
            size = struct.unpack_from('<I', page, p)[0]
            vals = [bool(v) for v in rle_hybrid(page, p + 4, p + 4 + size, 1, present)]
        else:
            name = ENCODINGS[encoding] if encoding < len(ENCODINGS) else encoding
            raise ParquetError('column %r: unsupported encoding %s' % (col.name, name))
        if col.max_def and present < n:     # re-insert nulls
            it = iter(vals)
            vals = [next(it) if d else None for d in defs]
        values.extend(vals)
    return values


def read_parquet(path):
    """Yield (column names) then the rows of a Parquet file, row group by row group."""
    with open(path, 'rb') as f:
        data = f.read()
    if data[:4] != b'PAR1' or data[-4:] != b'PAR1':
        raise ParquetError('not a Parquet file (missing PAR1 magic)')
    footer_len = struct.unpack_from('<I', data, len(data) - 8)[0]
    meta = Thrift(data, len(data) - 8 - footer_len).struct()
    schema = meta[2]
    if schema[0].get(5, 0) != len(schema) - 1:
        raise ParquetError('nested schemas are not supported')
    columns = [Column(el) for el in schema[1:]]
    yield [c.name for c in columns]
    for rg in meta.get(4, []):
        chunks = rg[1]
        if len(chunks) != len(columns):
            raise ParquetError('row group has %d columns, schema %d' % (len(chunks), len(columns)))
        cols = []
        for col, chunk in zip(columns, chunks):
            if chunk.get(1):
                raise ParquetError('column chunks in external files are not supported')
            cm = chunk[3]
            if cm[1] != col.ptype:
                raise ParquetError('column %r: chunk type %s differs from schema'
                                   % (col.name, PTYPES[cm[1]]))
            cols.append(read_chunk(data, col, cm))
        nrows = rg[3]
        for c, vals in zip(columns, cols):
            if len(vals) != nrows:
                raise ParquetError('column %r: %d values for %d rows' % (c.name, len(vals), nrows))
        yield from zip(*cols)


def js_float(x):
    """Format a float as ECMAScript Number.prototype.toString would."""
    if x == 0:
        return '0'
    if x != x or x in (float('inf'), float('-inf')):
        return repr(x)
    sign = '-' if x < 0 else ''
    mant, _, exp = repr(abs(x)).partition('e')     # shortest round-trip digits
    ip, _, fp = mant.partition('.')
    raw = ip + fp
    digits = raw.lstrip('0')
    n = len(ip) + int(exp or 0) - (len(raw) - len(digits))  # x = 0.DIGITS * 10**n
    digits = digits.rstrip('0')
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + '0' * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + '.' + digits[n:]
    if -6 < n <= 0:
        return sign + '0.' + '0' * -n + digits
    e = n - 1
    return '%s%s%s%se%s%d' % (sign, digits[0], '.' if k > 1 else '', digits[1:],
                              '+' if e > 0 else '-', abs(e))


def main(argv):
    args = argv[1:]
    fmt = js_float
    if args[:1] == ['--repr-floats']:
        args, fmt = args[1:], repr
    if len(args) != 2:
        sys.exit('usage: %s [--repr-floats] IN.parquet OUT.csv[.gz]' % argv[0])
    src, dst = args
    opener = gzip.open if dst.endswith('.gz') else open
    rows = read_parquet(src)
    n = 0
    try:
        with opener(dst, 'wt', newline='', encoding='utf-8') as out:
            w = csv.writer(out, lineterminator='\n')
            w.writerow(next(rows))
            for row in rows:
                # None and NaN become empty fields, as in pandas' to_csv.
                w.writerow(['' if v is None or v != v else
                            fmt(v) if type(v) is float else v for v in row])
                n += 1
    except ParquetError as e:
        os.remove(dst)                      # leave no partial output behind
        sys.exit('parquet2csv: %s: %s' % (src, e))
    print('%s: %d rows -> %s' % (src, n, dst))


if __name__ == '__main__':
    main(sys.argv)
