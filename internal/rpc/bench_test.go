package rpc

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// benchCalls runs b.N calls with req against a server running h: from
// par×GOMAXPROCS goroutines at once, so that many calls are in flight, or
// one after the other if par is 0.
func benchCalls(b *testing.B, h Handler, req []byte, par int) {
	benchCallsWith(b, h, req, par, ServerConfig{}, ClientConfig{})
}

// benchCallsWith is benchCalls against a server and a client configured
// with scfg and ccfg.
func benchCallsWith(b *testing.B, h Handler, req []byte, par int, scfg ServerConfig, ccfg ClientConfig) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	scfg.Logger = quietLogger()
	srv := NewServer(h, scfg)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ccfg.Logger = quietLogger()
	cl, err := Dial(ln.Addr().String(), ccfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		cl.Close()
		srv.Close()
		if err := <-served; err != nil {
			b.Error(err)
		}
	}()

	ctx := context.Background()
	b.SetParallelism(max(par, 1))
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	b.ResetTimer()
	if par == 0 {
		for range b.N {
			if status, _, err := cl.Call(ctx, 1, Cred{}, req); err != nil || status != StatusOK {
				b.Fatalf("call: %d, %v", status, err)
			}
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			status, _, err := cl.Call(ctx, 1, Cred{UID: 1000, GID: 1000}, req)
			if err != nil || status != StatusOK {
				b.Errorf("call: %d, %v", status, err)
				return
			}
		}
	})
}

// BenchmarkNullCall measures the transport alone: an empty call answered
// with an empty reply.
func BenchmarkNullCall(b *testing.B) {
	benchCalls(b, HandlerFunc(func(c *Call) { c.Reply(StatusOK, nil) }), nil, 32)
}

// nullHandler answers every call with an empty reply.
var nullHandler = HandlerFunc(func(c *Call) { c.Reply(StatusOK, nil) })

// BenchmarkNullCallMetrics is BenchmarkNullCall with every server and
// client metric exported to a registry.
func BenchmarkNullCallMetrics(b *testing.B) {
	benchCallsWith(b, nullHandler, nil, 32,
		ServerConfig{Metrics: prometheus.NewRegistry()}, ClientConfig{Metrics: prometheus.NewRegistry()})
}

// BenchmarkNullCallQueues is BenchmarkNullCall with calls going through the
// queues to the handler pool.
func BenchmarkNullCallQueues(b *testing.B) {
	benchCallsWith(b, nullHandler, nil, 32, ServerConfig{Queues: &QueueConfig{}}, ClientConfig{})
}

// BenchmarkNullCallQueuesMetrics has both queues and metrics.
func BenchmarkNullCallQueuesMetrics(b *testing.B) {
	benchCallsWith(b, nullHandler, nil, 32,
		ServerConfig{Queues: &QueueConfig{}, Metrics: prometheus.NewRegistry()}, ClientConfig{Metrics: prometheus.NewRegistry()})
}

// BenchmarkEcho64K sends 64 KiB of text-like bytes each way, compressed
// with S2, then with Zstandard, then not at all.
func BenchmarkEcho64K(b *testing.B) {
	req := bytes.Repeat([]byte("canopy metadata: inode 1234, mode 0644, uid 1000\n"), 64<<10/49)
	for _, tc := range []struct {
		name  string
		codec Codec
		above int
	}{{"s2", CodecS2, 0}, {"zstd", CodecZstd, 0}, {"none", 0, -1}} {
		b.Run(tc.name, func(b *testing.B) {
			benchCallsWith(b, echo, req, 8, ServerConfig{}, ClientConfig{Codecs: tc.codec, CompressAbove: tc.above})
		})
	}
}

// BenchmarkNullCallLatency makes one null call at a time.
func BenchmarkNullCallLatency(b *testing.B) {
	benchCalls(b, HandlerFunc(func(c *Call) { c.Reply(StatusOK, nil) }), nil, 0)
}

// BenchmarkEcho1K sends 1 KiB each way.
func BenchmarkEcho1K(b *testing.B) {
	benchCalls(b, echo, make([]byte, 1<<10), 32)
}
