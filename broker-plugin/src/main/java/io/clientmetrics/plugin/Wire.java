package io.clientmetrics.plugin;

import java.util.Arrays;

/**
 * The protobuf wire format, as much as rewriting a resource's attributes needs: read tags,
 * varints and length-delimited fields, skip any field, write fields. Bytes the plugin does not
 * edit are copied as they are, never decoded (docs/record-format.md).
 */
final class Wire {
    static final int VARINT = 0;
    static final int I64 = 1;
    static final int LEN = 2;
    static final int START_GROUP = 3;
    static final int END_GROUP = 4;
    static final int I32 = 5;
    private static final int MAX_GROUP_DEPTH = 64;

    private Wire() {}

    /** Bytes that are not a well-formed protobuf message. */
    static final class Malformed extends Exception {
        private static final long serialVersionUID = 1L;

        Malformed(String message) {
            super(message);
        }
    }

    /** Reads the fields of one message in {@code buf[pos, limit)}. */
    static final class Reader {
        final byte[] buf;
        int pos;
        final int limit;

        Reader(byte[] buf, int offset, int limit) {
            this.buf = buf;
            this.pos = offset;
            this.limit = limit;
        }

        boolean more() {
            return pos < limit;
        }

        /** The next tag: field number {@code << 3 | wire type}. */
        int tag() throws Malformed {
            long tag = varint();
            if (tag >>> 3 == 0 || tag > 0xFFFFFFFFL) {
                throw new Malformed("bad tag " + tag + " at " + pos);
            }
            return (int) tag;
        }

        long varint() throws Malformed {
            long value = 0;
            for (int shift = 0; shift < 64; shift += 7) {
                if (pos >= limit) {
                    throw new Malformed("truncated varint");
                }
                byte b = buf[pos++];
                value |= (long) (b & 0x7F) << shift;
                if (b >= 0) {
                    return value;
                }
            }
            throw new Malformed("varint longer than 10 bytes");
        }

        /** The length of a length-delimited field; {@code pos} is then at its first byte. */
        int length() throws Malformed {
            long length = varint();
            if (length < 0 || length > limit - pos) {
                throw new Malformed("length " + length + " past the end of the message");
            }
            return (int) length;
        }

        void skip(int wireType) throws Malformed {
            skip(wireType, 0);
        }

        private void skip(int wireType, int depth) throws Malformed {
            switch (wireType) {
                case VARINT:
                    varint();
                    return;
                case I64:
                    advance(8);
                    return;
                case LEN:
                    int length = length(); // not `pos += length()`: that adds to the old pos
                    pos += length;
                    return;
                case I32:
                    advance(4);
                    return;
                case START_GROUP:
                    if (depth >= MAX_GROUP_DEPTH) {
                        throw new Malformed("groups nested too deep");
                    }
                    while (true) {
                        int tag = tag();
                        if ((tag & 7) == END_GROUP) {
                            return;
                        }
                        skip(tag & 7, depth + 1);
                    }
                default:
                    throw new Malformed("wire type " + wireType);
            }
        }

        private void advance(int n) throws Malformed {
            if (n > limit - pos) {
                throw new Malformed("truncated field");
            }
            pos += n;
        }
    }

    /** A growable output buffer. */
    static final class Writer {
        private byte[] buf;
        private int size;

        Writer(int capacity) {
            buf = new byte[Math.max(16, capacity)];
        }

        int size() {
            return size;
        }

        void raw(byte[] src, int offset, int length) {
            ensure(length);
            System.arraycopy(src, offset, buf, size, length);
            size += length;
        }

        void raw(Writer other) {
            raw(other.buf, 0, other.size);
        }

        void varint(long value) {
            ensure(10);
            while ((value & ~0x7FL) != 0) {
                buf[size++] = (byte) ((value & 0x7F) | 0x80);
                value >>>= 7;
            }
            buf[size++] = (byte) value;
        }

        void tag(int field, int wireType) {
            varint((long) field << 3 | wireType);
        }

        /** A length-delimited field holding {@code src[offset, offset + length)}. */
        void field(int field, byte[] src, int offset, int length) {
            tag(field, LEN);
            varint(length);
            raw(src, offset, length);
        }

        void field(int field, Writer body) {
            field(field, body.buf, 0, body.size);
        }

        byte[] toByteArray() {
            return Arrays.copyOf(buf, size);
        }

        private void ensure(int more) {
            if (size + more > buf.length) {
                buf = Arrays.copyOf(buf, Math.max(buf.length * 2, size + more));
            }
        }
    }
}
