package rpc

import (
	"context"
	"net"
	"testing"
)

// benchCalls runs b.N calls with req against a server running h: from
// par×GOMAXPROCS goroutines at once, so that many calls are in flight, or
// one after the other if par is 0.
func benchCalls(b *testing.B, h Handler, req []byte, par int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := NewServer(h, ServerConfig{Logger: quietLogger()})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	cl, err := Dial(ln.Addr().String(), ClientConfig{Logger: quietLogger()})
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

// BenchmarkNullCallLatency makes one null call at a time.
func BenchmarkNullCallLatency(b *testing.B) {
	benchCalls(b, HandlerFunc(func(c *Call) { c.Reply(StatusOK, nil) }), nil, 0)
}

// BenchmarkEcho1K sends 1 KiB each way.
func BenchmarkEcho1K(b *testing.B) {
	benchCalls(b, echo, make([]byte, 1<<10), 32)
}
