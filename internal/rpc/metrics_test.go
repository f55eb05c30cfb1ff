package rpc

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// findMetric gathers reg and returns the metric of family name whose labels
// include labels (name, value pairs), failing the test if there is none.
func findMetric(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	metrics:
		for _, m := range fam.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			return m
		}
		t.Fatalf("metric %s has no series with labels %v", name, labels)
	}
	t.Fatalf("metric %s is not registered", name)
	return nil
}

// metricValue returns the value of a counter or gauge series.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	m := findMetric(t, reg, name, labels...)
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("metric %s is neither a counter nor a gauge", name)
	return 0
}

// metricCount returns the number of samples of a histogram series.
func metricCount(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) uint64 {
	t.Helper()
	m := findMetric(t, reg, name, labels...)
	if m.Histogram == nil {
		t.Fatalf("metric %s is not a histogram", name)
	}
	return m.Histogram.GetSampleCount()
}

// metricSum returns the sum of a histogram series' samples.
func metricSum(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	return findMetric(t, reg, name, labels...).GetHistogram().GetSampleSum()
}

func TestServerMetrics(t *testing.T) {
	checkGoroutines(t)
	reg := prometheus.NewRegistry()
	held := newHolder()
	srv := startServer(t, HandlerFunc(func(c *Call) {
		switch c.Method {
		case 1:
			c.Reply(StatusOK, c.Payload)
		case 7:
			c.Reply(2, nil) // the service's own status
		case 9:
			held.Serve(c)
		default:
			c.Reply(StatusUnknownMethod, nil)
		}
	}), ServerConfig{
		Metrics: reg,
		MethodName: func(m uint16) string {
			if m == 1 {
				return "ping"
			}
			return ""
		},
	})
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("metrics fail lint: %v %+v", err, problems)
	}
	cl := dial(t, srv.addr, ClientConfig{})
	if got := metricValue(t, reg, "canopy_rpc_connections"); got != 1 {
		t.Errorf("connections = %v, want 1", got)
	}

	for range 3 {
		if _, _, err := cl.Call(testCtx(t), 1, Cred{}, []byte("hello")); err != nil {
			t.Fatal(err)
		}
	}
	if st, _, err := cl.Call(testCtx(t), 7, Cred{}, nil); err != nil || st != 2 {
		t.Fatalf("call 7: %d, %v", st, err)
	}
	if _, _, err := cl.Call(testCtx(t), 300, Cred{}, nil); err == nil {
		t.Fatal("call to an unknown method succeeded")
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := cl.Call(testCtx(t), 9, Cred{}, nil)
		done <- err
	}()
	c := recv(t, held.calls)
	if got := metricValue(t, reg, "canopy_rpc_calls_in_flight"); got != 1 {
		t.Errorf("calls_in_flight with one call held = %v, want 1", got)
	}
	c.Reply(StatusOK, nil)
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		method, status string
		want           float64
	}{
		{"ping", "ok", 3}, {"ping", "busy", 0}, {"7", "service_error", 1}, {"300", "unknown_method", 1}, {"9", "ok", 1},
	} {
		if got := metricValue(t, reg, "canopy_rpc_calls_total", "method", tc.method, "status", tc.status); got != tc.want {
			t.Errorf("calls_total{method=%s,status=%s} = %v, want %v", tc.method, tc.status, got, tc.want)
		}
	}
	if got := metricCount(t, reg, "canopy_rpc_processing_seconds", "method", "ping"); got != 3 {
		t.Errorf("processing_seconds{method=ping} has %d samples, want 3", got)
	}
	const calls = 6
	for _, name := range []string{"canopy_rpc_decode_seconds", "canopy_rpc_encode_seconds"} {
		if got := metricCount(t, reg, name); got != calls {
			t.Errorf("%s has %d samples, want %d", name, got, calls)
		}
	}
	if got := metricValue(t, reg, "canopy_rpc_calls_in_flight"); got != 0 {
		t.Errorf("calls_in_flight after the calls = %v, want 0", got)
	}

	// Bytes are counted as on the wire, exactly.
	wantRead := len(appendHello(nil, &hello{version: protocolVersion, codecs: AllCodecs})) +
		3*len(appendCall(nil, 0, 0, 0, &Cred{}, []byte("hello"))) + 3*len(appendCall(nil, 0, 0, 0, &Cred{}, nil))
	wantWritten := len(appendWelcome(nil, welcome{version: protocolVersion})) +
		3*len(appendReply(nil, 0, 0, 0, 0, []byte("hello"))) + 3*len(appendReply(nil, 0, 0, 0, 0, nil))
	waitFor(t, "every reply to be counted as written", func() bool {
		return metricSum(t, reg, "canopy_rpc_frames_per_write") == calls
	})
	if got := metricValue(t, reg, "canopy_rpc_read_bytes_total"); got != float64(wantRead) {
		t.Errorf("read_bytes_total = %v, want %d", got, wantRead)
	}
	if got := metricValue(t, reg, "canopy_rpc_written_bytes_total"); got != float64(wantWritten) {
		t.Errorf("written_bytes_total = %v, want %d", got, wantWritten)
	}

	cl.Close()
	waitFor(t, "the connection gauge to drop", func() bool {
		return metricValue(t, reg, "canopy_rpc_connections") == 0
	})
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("metrics fail lint: %v %+v", err, problems)
	}
}

// Servers sharing a registerer share their metrics rather than failing.
func TestServersShareMetrics(t *testing.T) {
	checkGoroutines(t)
	reg := prometheus.NewRegistry()
	for range 2 {
		srv := startServer(t, echo, ServerConfig{Metrics: reg, Queues: &QueueConfig{Handlers: 1}})
		if _, _, err := dial(t, srv.addr, ClientConfig{}).Call(testCtx(t), 1, Cred{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := metricValue(t, reg, "canopy_rpc_calls_total", "method", "1", "status", "ok"); got != 2 {
		t.Fatalf("calls_total{method=1,status=ok} = %v, want 2 from two servers", got)
	}
}

func TestClientMetrics(t *testing.T) {
	checkGoroutines(t)
	reg := prometheus.NewRegistry()
	var busy attemptLog
	srv := startServer(t, HandlerFunc(func(c *Call) {
		if c.Method == 2 && busy.add(c) <= 2 {
			c.Reply(StatusBusy, nil)
			return
		}
		c.Reply(StatusOK, nil)
	}), ServerConfig{})
	cl := dial(t, srv.addr, ClientConfig{Metrics: reg, OpTimeout: bound})
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("metrics fail lint: %v %+v", err, problems)
	}

	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	srv.ln.killAll()
	waitFor(t, "server to drop the connection", func() bool { return srv.numConns() == 0 })
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, reg, "canopy_rpc_client_reconnects_total"); got != 1 {
		t.Errorf("reconnects_total = %v, want 1", got)
	}

	retries := metricValue(t, reg, "canopy_rpc_client_retries_total")
	if _, _, err := cl.Call(testCtx(t), 2, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, reg, "canopy_rpc_client_busy_total"); got != 2 {
		t.Errorf("busy_total = %v, want 2", got)
	}
	if got := metricValue(t, reg, "canopy_rpc_client_retries_total") - retries; got != 2 {
		t.Errorf("retries_total grew by %v over a call answered busy twice, want 2", got)
	}
}

func TestStatusClass(t *testing.T) {
	for status, want := range map[uint32]string{
		StatusOK: "ok", 2: "service_error", 0xffff: "service_error", StatusBusy: "busy",
		StatusMalformed: "malformed", StatusUnknownMethod: "unknown_method",
		StatusShuttingDown: "shutting_down", StatusInternal: "internal",
		StatusUnauthenticated: "transport_other", 0x20000: "transport_other",
	} {
		if got := statusClassNames[statusClass(status)]; got != want {
			t.Errorf("status %#x in class %q, want %q", status, got, want)
		}
	}
}

// A registerer that refuses metrics does not stop the server.
func TestMetricsRegistrationFailure(t *testing.T) {
	checkGoroutines(t)
	srv := startServer(t, echo, ServerConfig{Metrics: refusingRegisterer{}, Queues: &QueueConfig{Handlers: 1}})
	if _, reply, err := dial(t, srv.addr, ClientConfig{Metrics: refusingRegisterer{}}).Call(testCtx(t), 1, Cred{}, []byte("x")); err != nil || string(reply) != "x" {
		t.Fatalf("call: %q, %v", reply, err)
	}
}

type refusingRegisterer struct{}

func (refusingRegisterer) Register(prometheus.Collector) error  { return errors.New("refused") }
func (refusingRegisterer) MustRegister(...prometheus.Collector) { panic("MustRegister") }
func (refusingRegisterer) Unregister(prometheus.Collector) bool { return false }
