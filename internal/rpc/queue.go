package rpc

import (
	"runtime"
	"sync"
	"time"
)

// Class sorts calls into a Server's queues.
type Class uint8

const (
	ClassRead  Class = 0 // calls that only read; the zero value
	ClassWrite Class = 1 // calls that change state
	numClasses       = 2
)

func (c Class) String() string {
	if c == ClassRead {
		return "read"
	}
	return "write"
}

// QueueConfig sets up bounded call queues and a pool of handler goroutines,
// for services whose handlers may block. See ServerConfig.Queues.
type QueueConfig struct {
	// Classify returns the queue a method's calls go to. It runs on the
	// connections' reader goroutines for every call, so it must be cheap and
	// must not block. Any value but ClassRead means ClassWrite. Nil puts
	// every call in the read queue.
	Classify func(method uint16) Class

	// ReadQueue and WriteQueue are the queues' capacities; default 1024
	// each. A call arriving at a full queue is answered StatusBusy at once.
	ReadQueue, WriteQueue int

	// Handlers is the number of handler goroutines; default
	// 4 × GOMAXPROCS.
	Handlers int

	// ReadShare is, out of every 10 calls a handler takes while both
	// queues hold calls, how many it takes from the read queue; default 7.
	// It is kept within 1..9, so that neither class can starve the other.
	ReadShare int
}

// turns is the cycle ReadShare counts in.
const turns = 10

func (q *QueueConfig) setDefaults() {
	if q.ReadQueue <= 0 {
		q.ReadQueue = 1024
	}
	if q.WriteQueue <= 0 {
		q.WriteQueue = 1024
	}
	if q.Handlers <= 0 {
		q.Handlers = 4 * runtime.GOMAXPROCS(0)
	}
	if q.ReadShare <= 0 {
		q.ReadShare = 7
	}
	q.ReadShare = min(max(q.ReadShare, 1), turns-1)
}

// dispatcher owns a Server's queues and handler goroutines.
//
// Connection readers push calls without blocking; the handler goroutines
// (run) take them and call the Handler. A call in a queue belongs to the
// queue: nobody else touches it until a handler takes it.
type dispatcher struct {
	h         Handler
	classify  func(uint16) Class
	readShare int
	metrics   *serverMetrics // nil = none

	queues [numClasses]chan *Call

	stop     chan struct{} // closed to make the handlers return
	stopOnce sync.Once
	wg       sync.WaitGroup // the handler goroutines
}

// newDispatcher makes the queues and starts the handler goroutines; close
// stops them.
func newDispatcher(h Handler, cfg QueueConfig, m *serverMetrics) *dispatcher {
	d := &dispatcher{
		h:         h,
		classify:  cfg.Classify,
		readShare: cfg.ReadShare,
		metrics:   m,
		stop:      make(chan struct{}),
	}
	d.queues[ClassRead] = make(chan *Call, cfg.ReadQueue)
	d.queues[ClassWrite] = make(chan *Call, cfg.WriteQueue)
	d.wg.Add(cfg.Handlers)
	for range cfg.Handlers {
		go d.run()
	}
	return d
}

// push queues c, or answers it StatusBusy at once if its queue is full. It
// runs on a connection's reader goroutine and never blocks.
func (d *dispatcher) push(c *Call) {
	cls := ClassRead
	if d.classify != nil && d.classify(c.Method) != ClassRead {
		cls = ClassWrite
	}
	m := d.metrics
	c.enqueued = monotime()
	if m != nil {
		m.queueLen[cls].Inc() // before the call may be taken, or the gauge could dip below 0
	}
	select {
	case d.queues[cls] <- c:
		// c is the queue's now.
	default:
		if m != nil {
			m.queueLen[cls].Dec()
			m.busy[cls].Inc()
		}
		c.Reply(StatusBusy, nil)
	}
}

// run is a handler goroutine: it takes calls by the read share and serves
// them until the dispatcher closes.
func (d *dispatcher) run() {
	defer d.wg.Done()
	m := d.metrics
	turn := 0
	for {
		c, cls, ok := d.next(turn)
		if !ok {
			return
		}
		turn = (turn + 1) % turns
		now := monotime()
		wait := now - c.enqueued
		c.queued = time.Duration(wait)
		if m != nil {
			m.queueLen[cls].Dec()
			m.queueWait[cls].Observe(seconds(wait))
			m.handlersBusy.Inc()
		}
		d.h.Serve(c) // c may be replied to and recycled from here on
		if m != nil {
			m.handlersBusy.Dec()
		}
	}
}

// next takes the next call, waiting for one. On turns below the read share
// it looks at the read queue first, on the others at the write queue first,
// so that while both hold calls a handler takes them in that proportion.
// It reports false once the dispatcher is closing.
func (d *dispatcher) next(turn int) (*Call, Class, bool) {
	select {
	case <-d.stop:
		return nil, 0, false
	default:
	}
	first, second := ClassRead, ClassWrite
	if turn >= d.readShare {
		first, second = ClassWrite, ClassRead
	}
	select {
	case c := <-d.queues[first]:
		return c, first, true
	default:
	}
	select {
	case c := <-d.queues[second]:
		return c, second, true
	default:
	}
	select {
	case c := <-d.queues[ClassRead]:
		return c, ClassRead, true
	case c := <-d.queues[ClassWrite]:
		return c, ClassWrite, true
	case <-d.stop:
		return nil, 0, false
	}
}

// close stops the handler goroutines, waiting for those serving a call to
// return from the Handler, and answers the calls left in the queues with
// StatusShuttingDown. The server calls it once no connection can push any
// more.
func (d *dispatcher) close() {
	d.stopOnce.Do(func() {
		close(d.stop)
		d.wg.Wait()
		for cls, q := range d.queues {
			for drained := false; !drained; {
				select {
				case c := <-q:
					if d.metrics != nil {
						d.metrics.queueLen[cls].Dec()
					}
					c.Reply(StatusShuttingDown, nil)
				default:
					drained = true
				}
			}
		}
	})
}
