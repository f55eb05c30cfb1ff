package wal

import (
	"encoding/binary"
	"hash/crc32"
)

// MaxRecordSize is the largest payload a record may carry. A length field
// above it marks the end of the valid log.
const MaxRecordSize = 32 << 20

// recordHeaderSize is the size of a record's length, crc and lsn fields.
const recordHeaderSize = 16

// crcTable is the CRC-32C table; with it package crc32 uses the CPU's CRC
// instructions where there are any.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// putRecordHeader fills hdr with the header of a record carrying lsn and
// payload.
func putRecordHeader(hdr *[recordHeaderSize]byte, lsn uint64, payload []byte) {
	binary.LittleEndian.PutUint32(hdr[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint64(hdr[8:16], lsn)
	binary.LittleEndian.PutUint32(hdr[4:8], recordCRC(hdr, payload))
}

// recordCRC returns the checksum of the lsn in hdr followed by payload.
func recordCRC(hdr *[recordHeaderSize]byte, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, crcTable, hdr[8:16]), crcTable, payload)
}

// decodeRecordHeader returns the fields of a record header.
func decodeRecordHeader(hdr *[recordHeaderSize]byte) (length, crc uint32, lsn uint64) {
	return binary.LittleEndian.Uint32(hdr[0:4]),
		binary.LittleEndian.Uint32(hdr[4:8]),
		binary.LittleEndian.Uint64(hdr[8:16])
}
