package cli

import (
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressDelay is how long a transfer runs before it shows a bar.
const progressDelay = time.Second

// progress counts the bytes of a transfer and, once it has taken longer
// than progressDelay and out is a terminal, draws a bar on out. Its
// goroutine owns the bar; the counter is shared.
type progress struct {
	total int64
	done  atomic.Int64
	stop  chan struct{}
	ended chan struct{}
}

// startProgress begins counting towards total bytes.
func startProgress(out io.Writer, total int64, what string) *progress {
	p := &progress{total: total, stop: make(chan struct{}), ended: make(chan struct{})}
	f, isFile := out.(*os.File)
	if !isFile || !term.IsTerminal(int(f.Fd())) {
		close(p.ended)
		return p
	}
	go p.draw(f, what)
	return p
}

func (p *progress) draw(out io.Writer, what string) {
	defer close(p.ended)
	select {
	case <-p.stop:
		return
	case <-time.After(progressDelay):
	}
	bar := progressbar.NewOptions64(p.total,
		progressbar.OptionSetWriter(out), progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true),
		progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish(), progressbar.OptionOnCompletion(func() { io.WriteString(out, "\n") }))
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			bar.Set64(p.done.Load())
			bar.Finish()
			return
		case <-t.C:
			bar.Set64(p.done.Load())
		}
	}
}

// finish stops the bar.
func (p *progress) finish() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.ended
}

// Write counts bytes that passed; it makes progress an io.Writer for
// io.TeeReader.
func (p *progress) Write(b []byte) (int, error) {
	p.done.Add(int64(len(b)))
	return len(b), nil
}
