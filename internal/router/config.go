package router

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a router.
type Config struct {
	Listen   string               // address to serve on, e.g. "127.0.0.1:0"
	Root     []string             // metadata server address(es) of vpart 0, which keeps the tables
	Secret   string               // shared secret, for clients and downstream
	Token    string               // the router's own credential token downstream (a router credential); "" = none
	TLS      *tls.Config          // optional, for the listener
	Registry *prometheus.Registry // optional: where the router's metrics go
	Logger   *slog.Logger         // default slog.Default()

	// MaxReads and MaxWrites bound the calls of each class in flight
	// through the router; a call beyond the bound is refused with
	// StatusBusy. Default 8192 each.
	MaxReads, MaxWrites int

	// ConnsPerServer is the number of connections kept to each metadata
	// server; default 1. Calls share them, multiplexed; more connections
	// mean smaller batches per write.
	ConnsPerServer int

	// TablesWait is how long one long poll for new tables waits at the
	// root partition before asking again; default 10s.
	TablesWait time.Duration

	// XRenameEvery is how often the router looks for renames across
	// partitions left half done (xrename.go); default 2s, negative: never.
	// XRenameGrace is how long an intent may stay prepared before that
	// pass aborts it; default 10s.
	XRenameEvery, XRenameGrace time.Duration

	// MoveEvery is how often the router looks for moves of virtual
	// partitions between groups whose mover stopped (moves.go); default
	// 2s, negative: never.
	MoveEvery time.Duration

	// SessionEndDelay is how long the router waits, once a client's last
	// connection to it closed, before it ends the client's sessions at
	// the partitions (session.go): a client that went on through another
	// router is heard there first, and keeps its session. Default 250ms,
	// negative: none.
	SessionEndDelay time.Duration
}

// DefaultSessionEndDelay is Config.SessionEndDelay's default.
const DefaultSessionEndDelay = 250 * time.Millisecond

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxReads <= 0 {
		c.MaxReads = 8192
	}
	if c.MaxWrites <= 0 {
		c.MaxWrites = 8192
	}
	if c.ConnsPerServer <= 0 {
		c.ConnsPerServer = 1
	}
	if c.TablesWait <= 0 {
		c.TablesWait = 10 * time.Second
	}
	if c.XRenameEvery == 0 {
		c.XRenameEvery = 2 * time.Second
	}
	if c.MoveEvery == 0 {
		c.MoveEvery = 2 * time.Second
	}
	if c.SessionEndDelay == 0 {
		c.SessionEndDelay = DefaultSessionEndDelay
	}
	if c.XRenameGrace <= 0 {
		c.XRenameGrace = 10 * time.Second
	}
}
