package rpc

// Connected reports whether client has a connection to the server that
// completed its handshake: one it made itself, not calls forwarded for it
// by another client (a router). Any goroutine may call it.
func (s *Server) Connected(client ClientID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[client] > 0
}
