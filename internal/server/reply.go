package server

import (
	"syscall"

	"google.golang.org/protobuf/proto"
)

// replier is the last stage, reply: it answers the calls of a batch the
// committer made durable (or failed to: then every call is answered EIO).
// It runs on the committer's goroutine, right after the batch's fsync,
// and buf, its encoding buffer, is that goroutine's: a goroutine of its
// own would add a hand-off to every batch for work that is small next to
// the fsync. Table long polls that found nothing new are parked in watch
// (dispatch_tables.go) and answered from there later.
type replier struct {
	buf   []byte
	watch *tablesWatch
}

// deliver answers b's calls; commitErr is the committer's verdict.
func (r *replier) deliver(b *batch, commitErr error) {
	for _, o := range b.ops {
		if o.call == nil {
			continue // nobody waits for a reply
		}
		if commitErr != nil {
			o.status, o.reply = uint32(syscall.EIO), nil
		}
		if r.afterCommit(o) {
			continue
		}
		r.buf = r.buf[:0]
		if o.reply != nil {
			r.buf, _ = proto.MarshalOptions{}.MarshalAppend(r.buf, o.reply)
		}
		o.call.Reply(o.status, r.buf)
	}
}
