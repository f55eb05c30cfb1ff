package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestConcurrentProposalsShareEntries proposes from many goroutines at
// once: every proposal gets its own answer, every replica applies every
// command, and proposals taken in the same turn share Raft entries.
func TestConcurrentProposalsShareEntries(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := newCluster(t, 3, func(cfg *Config) { cfg.Registerer = reg })
	lead := c.leader()
	const proposers, each = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, proposers)
	for p := range proposers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// A leader change on a loaded machine is retried at
				// whichever replica leads then.
				deadline := time.Now().Add(30 * time.Second)
				at := lead
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					_, err := c.nodes[at].Propose(ctx, []byte(fmt.Sprintf("p%d-%d=v%d", p, i, i)))
					cancel()
					if err == nil {
						break
					}
					if !isRetryable(err) || time.Now().After(deadline) {
						errs <- err
						return
					}
					if l := c.status(at).Leader; l != 0 {
						at = l
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("propose: %v", err)
	}
	lead = c.leader()
	last := c.status(lead).Commit
	for _, id := range c.peers {
		c.waitApplied(id, last)
		for p := range proposers {
			if v, _ := c.sms[id].get(fmt.Sprintf("p%d-%d", p, each-1)); v != fmt.Sprint("v", each-1) {
				t.Fatalf("replica %d: p%d-%d = %q", id, p, each-1, v)
			}
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var h *dto.Histogram
	for _, mf := range mfs {
		if mf.GetName() == "canopy_replica_proposals_per_entry" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "replica" && l.GetValue() == fmt.Sprint(lead) {
						h = m.GetHistogram()
					}
				}
			}
		}
	}
	if h == nil || h.GetSampleSum() != proposers*each {
		t.Fatalf("proposals per entry: %v, want a sum of %d", h, proposers*each)
	}
	if h.GetSampleCount() >= proposers*each {
		t.Fatalf("%d entries for %d proposals: none shared an entry", h.GetSampleCount(), proposers*each)
	}
}

func TestBatchEntryRoundTrip(t *testing.T) {
	var data []byte
	data = binary.LittleEndian.AppendUint64(data, 0)
	data = binary.LittleEndian.AppendUint64(data, 77)
	cmds := [][]byte{[]byte("a=1"), nil, []byte("bb=22")}
	data = binary.AppendUvarint(data, uint64(len(cmds)))
	for i, c := range cmds {
		data = binary.AppendUvarint(data, uint64(10+i))
		data = binary.AppendUvarint(data, uint64(len(c)))
		data = append(data, c...)
	}
	if !isBatch(data) {
		t.Fatal("not seen as a batch")
	}
	var got [][]byte
	err := eachInBatch(data, func(epoch, seq uint64, cmd []byte) {
		if epoch != 77 || seq != uint64(10+len(got)) {
			t.Fatalf("epoch %d seq %d", epoch, seq)
		}
		got = append(got, cmd)
	})
	if err != nil || len(got) != len(cmds) {
		t.Fatalf("decoded %d commands, err %v", len(got), err)
	}
	for i := range cmds {
		if !bytes.Equal(got[i], cmds[i]) {
			t.Fatalf("command %d = %q, want %q", i, got[i], cmds[i])
		}
	}
	if err := eachInBatch(data[:len(data)-1], func(uint64, uint64, []byte) {}); err == nil {
		t.Fatal("a cut batch decodes")
	}
}

// FuzzBatchEntry feeds arbitrary entry data to the batch decoder: it
// must not panic, and the commands it yields lie within the data.
func FuzzBatchEntry(f *testing.F) {
	f.Add([]byte{})
	f.Add(append(make([]byte, 16), 2, 1, 3, 'a', '=', '1', 2, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !isBatch(data) {
			return
		}
		total := 0
		_ = eachInBatch(data, func(_, _ uint64, cmd []byte) { total += len(cmd) })
		if total > len(data) {
			t.Fatalf("commands of %d bytes from %d", total, len(data))
		}
	})
}
