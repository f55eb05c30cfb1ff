package rpc

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// LogLimiter rate-limits security-relevant log lines (failed handshakes,
// refused tokens and calls), so that a flood of bad connections cannot
// fill the disk: beyond the rate, lines are counted, not written, and the
// next line written says how many were left out. Any goroutine may use
// it.
type LogLimiter struct {
	lim        *rate.Limiter
	suppressed atomic.Uint64
}

// NewLogLimiter allows perSecond lines a second on average, burst at once.
func NewLogLimiter(perSecond float64, burst int) *LogLimiter {
	return &LogLimiter{lim: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// Log writes the line at level to log if the rate allows, with the count
// of lines left out since the last one written.
func (l *LogLimiter) Log(log *slog.Logger, level slog.Level, msg string, args ...any) {
	if !l.lim.AllowN(time.Now(), 1) {
		l.suppressed.Add(1)
		return
	}
	if n := l.suppressed.Swap(0); n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Log(context.Background(), level, msg, args...)
}

// Suppressed returns the lines left out and not yet reported.
func (l *LogLimiter) Suppressed() uint64 { return l.suppressed.Load() }
