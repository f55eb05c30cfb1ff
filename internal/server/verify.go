package server

import "fmt"

// Verify recovers the partition stored in cfg.Dir without serving it, and
// checks the namespace's invariants (see engine.Check). It returns the
// number of nodes. It must not run while a server has the directory open.
func Verify(cfg Config) (int, error) {
	s, err := recoverOffline(cfg)
	if err != nil {
		return 0, err
	}
	defer s.wal.Close()
	if err := s.eng.Check(); err != nil {
		return s.eng.Len(), fmt.Errorf("verify %s: %w", cfg.Dir, err)
	}
	return s.eng.Len(), nil
}

// recoverOffline recovers the partition in cfg.Dir into a server that runs
// no goroutine, so the caller may read its engine directly.
func recoverOffline(cfg Config) (*Server, error) {
	cfg.setDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, cache: newRetryCache(cfg.RetryCacheSize)}
	if err := s.recover(); err != nil {
		return nil, err
	}
	return s, nil
}
