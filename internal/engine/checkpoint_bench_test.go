package engine

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// benchNamespace returns the checkpoint of an engine holding files
// regular files in directories of 1,000, every fiftieth with an xattr,
// every hundredth with a slice of data.
func benchNamespace(b *testing.B, files int) []byte {
	b.Helper()
	e := New(0, 1)
	var dir Ino
	for i := range files {
		if i%1000 == 0 {
			a, err := e.Mkdir(Cred{}, e.Root(), fmt.Sprintf("d%05d", i/1000), 0o755, 1)
			if err != nil {
				b.Fatal(err)
			}
			dir = a.Ino
		}
		a, err := e.Mknod(Cred{}, dir, fmt.Sprintf("file.mdtest.0.%d", i), S_IFREG|0o644, 0, 1)
		if err != nil {
			b.Fatal(err)
		}
		if i%50 == 0 {
			e.SetXattr(Cred{}, a.Ino, "user.n", []byte("value"), 0, 1)
		}
		if i%100 == 0 {
			if first, got, err := e.AllocSlices(a.Ino, 1); err == nil && got > 0 {
				e.Commit(Cred{}, a.Ino, []SliceWrite{{Slice: Slice{ID: first, Size: 4096, Len: 4096}}}, 4096, 2, 2)
			}
		}
	}
	var buf bytes.Buffer
	if err := e.WriteCheckpoint(&buf); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

const benchCkptFiles = 200_000

// BenchmarkLoad measures Load, the decoding half of canopy load.
func BenchmarkLoad(b *testing.B) {
	ck := benchNamespace(b, benchCkptFiles)
	b.SetBytes(int64(len(ck)))
	b.ResetTimer()
	for range b.N {
		if _, err := Load(bytes.NewReader(ck)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchCkptFiles)*float64(b.N)/b.Elapsed().Seconds(), "nodes/s")
}

// BenchmarkLoadSerial is BenchmarkLoad on one goroutine, the reference
// for the parallel load's figure.
func BenchmarkLoadSerial(b *testing.B) {
	ck := benchNamespace(b, benchCkptFiles)
	b.SetBytes(int64(len(ck)))
	b.ResetTimer()
	for range b.N {
		if _, err := load(bytes.NewReader(ck), false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchCkptFiles)*float64(b.N)/b.Elapsed().Seconds(), "nodes/s")
}

// BenchmarkCheckpointToJSON measures the JSON form's encoding.
func BenchmarkCheckpointToJSON(b *testing.B) {
	ck := benchNamespace(b, benchCkptFiles)
	b.SetBytes(int64(len(ck)))
	b.ResetTimer()
	for range b.N {
		if err := CheckpointToJSON(bytes.NewReader(ck), io.Discard, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchCkptFiles)*float64(b.N)/b.Elapsed().Seconds(), "nodes/s")
}

// BenchmarkJSONToCheckpoint measures the JSON form's decoding.
func BenchmarkJSONToCheckpoint(b *testing.B) {
	ck := benchNamespace(b, benchCkptFiles)
	var js bytes.Buffer
	if err := CheckpointToJSON(bytes.NewReader(ck), &js, nil); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(js.Len()))
	b.ResetTimer()
	for range b.N {
		if err := JSONToCheckpoint(bytes.NewReader(js.Bytes()), io.Discard, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchCkptFiles)*float64(b.N)/b.Elapsed().Seconds(), "nodes/s")
}

// BenchmarkWriteCheckpoint measures the encoding of a dump.
func BenchmarkWriteCheckpoint(b *testing.B) {
	ck := benchNamespace(b, benchCkptFiles)
	e, err := Load(bytes.NewReader(ck))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(ck)))
	b.ResetTimer()
	for range b.N {
		if err := e.WriteCheckpoint(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchCkptFiles)*float64(b.N)/b.Elapsed().Seconds(), "nodes/s")
}
