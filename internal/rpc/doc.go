// Package rpc is Canopy's framed request/response transport over TCP.
//
// It moves opaque calls between a Client and a Server and knows nothing of
// what they mean: a method is a uint16, a payload is bytes, a status is a
// uint32. Services (the metadata service, the data service) define their
// methods and payload encodings on top of it.
//
// # Wire format
//
// All integers are little-endian. Every frame starts with a 4-byte length,
// the number of bytes that follow it, which must not exceed the receiver's
// MaxFrame (16 MiB by default). A fixed 16-byte header follows:
//
//	u32 length   bytes after this field
//	u8  kind     1 call, 2 reply, 3 hello, 4 welcome
//	u8  flags    reserved, must be 0
//	u16 method
//	u64 call id
//	u32 status   replies only; 0 in every other kind
//
// A call carries the caller's identity, then its payload:
//
//	u32 uid, u32 gid, u16 ngroups (at most 64), ngroups × u32 groups
//	payload      the rest of the frame
//
// A reply's payload follows the header directly; it echoes the call's
// method and id.
//
// The first frame on a connection is the client's hello, answered by the
// server's welcome. In both, method, call id and status are 0:
//
//	hello:   "CNPY", u16 version (1), [16]byte client id,
//	         u16 secret length, secret bytes
//	welcome: u16 version accepted, u32 status
//
// The welcome's status is 0 when the connection may carry calls,
// StatusUnauthenticated when the secret is wrong and StatusBadVersion when
// the server does not speak the client's version; after a refusal the server
// closes the connection without serving any call.
//
// A frame that cannot be decoded, is longer than MaxFrame or is of a kind
// the receiver does not expect closes the connection it came on, and only
// that one.
//
// # Statuses, retries and call ids
//
// Status 0 is success. Statuses below StatusTransport belong to the service
// and pass through untouched. Statuses from StatusTransport up belong to the
// transport; the Client turns them into a *StatusError. StatusBusy and
// StatusShuttingDown are retriable.
//
// A Client numbers its calls from a counter that never repeats for its
// lifetime and resends a retried call with the same id, so a server that
// remembers (client id, call id) pairs can recognise a retry of a call it
// already executed.
//
// # Concurrency
//
// A connection carries many calls at once; replies come back in whatever
// order the server finishes them. On both sides one reader goroutine decodes
// incoming frames and one writer goroutine writes outgoing ones. Senders
// append encoded frames to the connection's pending output under a short
// lock, and the writer sends all that has accumulated in a single write.
package rpc
