package rpc

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	readMethod  uint16 = 1
	writeMethod uint16 = 2
)

func classifyTest(method uint16) Class {
	if method == writeMethod {
		return ClassWrite
	}
	return ClassRead
}

// gatedHandler holds the first call it is given until release is closed,
// and answers every other call at once, recording the order of methods.
type gatedHandler struct {
	held    chan *Call    // receives the held call
	release chan struct{} // closed to let the held call go

	mu    sync.Mutex
	order []uint16 // methods of the calls answered after the held one
	first atomic.Bool
}

func newGatedHandler() *gatedHandler {
	return &gatedHandler{held: make(chan *Call, 1), release: make(chan struct{})}
}

func (h *gatedHandler) Serve(c *Call) {
	if h.first.CompareAndSwap(false, true) {
		h.held <- c
		<-h.release
		c.Reply(StatusOK, nil)
		return
	}
	h.mu.Lock()
	h.order = append(h.order, c.Method)
	h.mu.Unlock()
	c.Reply(StatusOK, nil)
}

func (h *gatedHandler) served() []uint16 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint16(nil), h.order...)
}

// queued returns how many calls wait in the server's queue of class cls.
func (ts *testServer) queued(cls Class) int { return len(ts.queues.queues[cls]) }

// A burst of writes queued ahead of reads does not hold the reads back:
// while both queues hold calls, a handler takes 7 reads in every 10.
func TestQueueReadShareBeatsWriteBurst(t *testing.T) {
	checkGoroutines(t)
	h := newGatedHandler()
	srv := startServer(t, h, ServerConfig{Queues: &QueueConfig{
		Classify: classifyTest, Handlers: 1, ReadShare: 7,
	}})
	nc := rawConn(t, srv.addr)
	if w := rawHandshake(t, nc, hello{version: protocolVersion}); w.status != StatusOK {
		t.Fatalf("welcome %+v", w)
	}

	// The one handler takes a first call and holds it.
	if _, err := nc.Write(appendCall(nil, 1, writeMethod, 0, &Cred{}, nil)); err != nil {
		t.Fatal(err)
	}
	recv(t, h.held)

	// 100 writes, then 20 reads, in one burst.
	const writes, reads = 100, 20
	var burst []byte
	id := uint64(2)
	for range writes {
		burst = appendCall(burst, id, writeMethod, 0, &Cred{}, nil)
		id++
	}
	for range reads {
		burst = appendCall(burst, id, readMethod, 0, &Cred{}, nil)
		id++
	}
	if _, err := nc.Write(burst); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the burst to be queued", func() bool {
		return srv.queued(ClassWrite) == writes && srv.queued(ClassRead) == reads
	})
	close(h.release)

	fr := newFrameReader(nc, DefaultMaxFrame)
	for range 1 + writes + reads {
		body, _, err := fr.next()
		if err != nil {
			t.Fatalf("read reply: %v", err)
		}
		if f, err := decodeFrame(body); err != nil || f.status != StatusOK {
			t.Fatalf("reply %+v, %v", f, err)
		}
	}
	order := h.served()
	if len(order) != writes+reads {
		t.Fatalf("served %d calls after the held one, want %d", len(order), writes+reads)
	}
	count := func(calls []uint16, method uint16) (n int) {
		for _, m := range calls {
			if m == method {
				n++
			}
		}
		return n
	}
	if n := count(order[:10], readMethod); n != 7 {
		t.Errorf("first 10 calls served held %d reads, want 7: %v", n, order[:10])
	}
	// 20 reads at 7 in 10 are all served within the first 29 calls; in
	// arrival order they would come after all 100 writes.
	last := 0
	for i, m := range order {
		if m == readMethod {
			last = i
		}
	}
	if last >= 29 {
		t.Errorf("the last read was call %d served, want within the first 29: %v", last+1, order)
	}
	if n := count(order[:last+1], writeMethod); n < 3 {
		t.Errorf("only %d writes were served among the reads: reads starved writes", n)
	}
}

// With queues, handlers may block: calls still reach the other handlers.
func TestQueueHandlersMayBlock(t *testing.T) {
	checkGoroutines(t)
	const handlers = 4
	var (
		mu      sync.Mutex
		waiting []*Call
	)
	srv := startServer(t, HandlerFunc(func(c *Call) {
		// Block until every handler holds a call, then answer them all;
		// served on the reader goroutine, this would never get past the
		// first call.
		mu.Lock()
		waiting = append(waiting, c)
		if len(waiting) < handlers {
			mu.Unlock()
			return
		}
		all := waiting
		waiting = nil
		mu.Unlock()
		for _, c := range all {
			c.Reply(StatusOK, c.Payload)
		}
	}), ServerConfig{Queues: &QueueConfig{Handlers: handlers}})
	cl := dial(t, srv.addr, ClientConfig{})
	errs := make(chan error, handlers)
	for i := range handlers {
		go func() {
			_, reply, err := cl.Call(testCtx(t), readMethod, Cred{}, []byte{byte(i)})
			if err == nil && (len(reply) != 1 || reply[0] != byte(i)) {
				err = errors.New("wrong reply")
			}
			errs <- err
		}()
	}
	for range handlers {
		if err := recv(t, errs); err != nil {
			t.Fatal(err)
		}
	}
}

// A call arriving at a full queue is answered StatusBusy at once, while the
// handler is still stuck on an earlier call.
func TestQueueFullAnswersBusy(t *testing.T) {
	checkGoroutines(t)
	reg := prometheus.NewRegistry()
	h := newGatedHandler()
	srv := startServer(t, h, ServerConfig{
		Queues:  &QueueConfig{Classify: classifyTest, Handlers: 1, ReadQueue: 2},
		Metrics: reg,
	})
	cl := dial(t, srv.addr, ClientConfig{MaxRetries: -1})
	errs := make(chan error, 3)
	call := func() {
		_, _, err := cl.Call(testCtx(t), readMethod, Cred{}, nil)
		errs <- err
	}
	go call()
	recv(t, h.held)
	go call()
	go call()
	waitFor(t, "the queue to fill", func() bool { return srv.queued(ClassRead) == 2 })

	// The handler is still held, so this answer can only come from the
	// reader.
	status, _, err := cl.Call(testCtx(t), readMethod, Cred{}, nil)
	if !errors.Is(err, ErrBusy) || status != StatusBusy {
		t.Fatalf("call to a full queue: %d, %v; want StatusBusy", status, err)
	}
	// A write goes to the other queue, which has room, and waits there.
	go func() {
		_, _, err := cl.Call(testCtx(t), writeMethod, Cred{}, nil)
		errs <- err
	}()
	waitFor(t, "the write to be queued", func() bool { return srv.queued(ClassWrite) == 1 })

	if got := metricValue(t, reg, "canopy_rpc_busy_refusals_total", "class", "read"); got != 1 {
		t.Errorf("busy_refusals_total{class=read} = %v, want 1", got)
	}
	if got := metricValue(t, reg, "canopy_rpc_queue_length", "class", "read"); got != 2 {
		t.Errorf("queue_length{class=read} = %v, want 2", got)
	}
	if got := metricValue(t, reg, "canopy_rpc_handlers_busy"); got != 1 {
		t.Errorf("handlers_busy = %v, want 1", got)
	}
	if got := metricValue(t, reg, "canopy_rpc_calls_in_flight"); got != 4 {
		t.Errorf("calls_in_flight = %v, want 4 (1 held, 3 queued)", got)
	}

	close(h.release)
	for range 4 {
		if err := recv(t, errs); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the queues to empty", func() bool {
		return metricValue(t, reg, "canopy_rpc_queue_length", "class", "read") == 0 &&
			metricValue(t, reg, "canopy_rpc_calls_in_flight") == 0
	})
	if got := metricCount(t, reg, "canopy_rpc_queue_wait_seconds", "class", "read"); got != 3 {
		t.Errorf("queue_wait_seconds{class=read} has %d samples, want 3", got)
	}
	if got := metricValue(t, reg, "canopy_rpc_calls_total", "method", "1", "status", "busy"); got != 1 {
		t.Errorf("calls_total{method=1,status=busy} = %v, want 1", got)
	}
}

// Shutdown lets queued calls through and then stops the handlers.
func TestQueueShutdownDrains(t *testing.T) {
	checkGoroutines(t)
	h := newGatedHandler()
	srv := startServer(t, h, ServerConfig{Queues: &QueueConfig{Handlers: 1}})
	cl := dial(t, srv.addr, ClientConfig{MaxRetries: -1})
	const n = 4
	errs := make(chan error, n)
	for range n {
		go func() {
			_, _, err := cl.Call(testCtx(t), readMethod, Cred{}, nil)
			errs <- err
		}()
	}
	recv(t, h.held)
	waitFor(t, "calls to be queued", func() bool { return srv.queued(ClassRead) == n-1 })

	shutdown := make(chan error, 1)
	go func() { shutdown <- srv.Shutdown(testCtx(t)) }()
	waitFor(t, "shutdown to begin", srv.shuttingDown.Load)
	close(h.release)
	for range n {
		if err := recv(t, errs); err != nil {
			t.Fatalf("queued call during shutdown: %v", err)
		}
	}
	if err := recv(t, shutdown); err != nil {
		t.Fatal(err)
	}
	if got := len(h.served()); got != n-1 {
		t.Fatalf("served %d queued calls, want %d", got, n-1)
	}
}

// Close drops queued calls and stops the handlers.
func TestQueueCloseDropsQueued(t *testing.T) {
	checkGoroutines(t)
	h := newGatedHandler()
	srv := startServer(t, h, ServerConfig{Queues: &QueueConfig{Handlers: 1}})
	cl := dial(t, srv.addr, ClientConfig{MaxRetries: -1})
	const n = 3
	errs := make(chan error, n)
	for range n {
		go func() {
			_, _, err := cl.Call(testCtx(t), readMethod, Cred{}, nil)
			errs <- err
		}()
	}
	recv(t, h.held)
	waitFor(t, "calls to be queued", func() bool { return srv.queued(ClassRead) == n-1 })
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	for range n {
		if err := recv(t, errs); err == nil {
			t.Fatal("call succeeded on a closed server")
		}
	}
	// Close waits for the handler to return; let it once the handlers
	// have been told to stop.
	waitFor(t, "Close to stop the handlers", func() bool {
		select {
		case <-srv.queues.stop:
			return true
		default:
			return false
		}
	})
	close(h.release)
	if err := recv(t, closed); err != nil {
		t.Fatal(err)
	}
	if got := len(h.served()); got != 0 {
		t.Fatalf("served %d queued calls after Close, want 0", got)
	}
}

func TestQueueConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		in, want QueueConfig
	}{
		{QueueConfig{Handlers: 3}, QueueConfig{ReadQueue: 1024, WriteQueue: 1024, Handlers: 3, ReadShare: 7}},
		{QueueConfig{Handlers: 1, ReadShare: 10}, QueueConfig{ReadQueue: 1024, WriteQueue: 1024, Handlers: 1, ReadShare: 9}},
		{QueueConfig{Handlers: 1, ReadShare: -4, ReadQueue: 5}, QueueConfig{ReadQueue: 5, WriteQueue: 1024, Handlers: 1, ReadShare: 7}},
	} {
		got := tc.in
		got.setDefaults()
		if got.ReadQueue != tc.want.ReadQueue || got.WriteQueue != tc.want.WriteQueue ||
			got.Handlers != tc.want.Handlers || got.ReadShare != tc.want.ReadShare {
			t.Errorf("%+v with defaults = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
