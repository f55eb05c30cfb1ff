package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// maxCachedReply bounds one retry-cache reply read from a checkpoint.
const maxCachedReply = 1 << 20

// stateMachine is the partition's state: the namespace (engine), the
// retry cache and the files each client has open (sessions), with the
// log position and the replicated clock they are at. It is owned by the
// apply loop (applier), and before the loop starts by recovery; nothing
// else touches it while the server runs.
//
// The state is a function of the log: every change is a log record, and
// every record goes through Apply, on the live path (applyOp) as in log
// replay (replayRecord), and so later on a follower. Reads leave it as it
// is.
type stateMachine struct {
	eng      *engine.Engine
	cache    *retryCache
	sessions sessions      // files open per client
	creds    *credStore    // the credentials (access.go); the root partition's only
	grants   *scopeGrants  // nodes shown to path-scoped clients (scope.go): not state, shared with the intake
	fwd      *forwardsView // the engine's forwards, for lock calls at the intake: not state, shared with it
	ttl      int64         // how long a retry-cache entry lives, in the records' time
	// unloggedDays is the trash days of a state whose checkpoint did not
	// carry them (state version < 3), until a record sets them: the
	// configured value, as versions before applied it (settings.go).
	unloggedDays int
	log          *slog.Logger

	nextLSN   uint64 // the LSN the next log record will get
	lastNow   int64  // the time of the latest record applied; the clock never goes back
	sinceCkpt int    // records logged since the last checkpoint was encoded
	// spareTail holds a retry-cache copy a checkpoint is done with
	// (frozenTail.spare); capacity 1.
	spareTail chan []retrySlot

	retryHits atomic.Uint64 // retried calls answered from the retry cache; any goroutine may read it

	ops opsState // dumps, status and announced clients; see status.go
}

func newStateMachine(cacheSize int, ttl time.Duration, log *slog.Logger) *stateMachine {
	sm := &stateMachine{cache: newRetryCache(cacheSize), sessions: make(sessions), creds: newCredStore(), fwd: &forwardsView{},
		spareTail: make(chan []retrySlot, 1),
		grants:    newScopeGrants(), ttl: int64(ttl), log: log}
	go sm.warmSpareTail(len(sm.cache.ring))
	return sm
}

// warmSpareTail offers the first checkpoint's freeze a buffer for the
// retry cache's copy, with every page of it already mapped: copied into
// memory fresh from the kernel, a full cache cost 12 ms of page faults on
// the apply loop. It runs on a goroutine of its own, which owns the
// buffer until it is sent; if a buffer is there already, it drops its own.
func (sm *stateMachine) warmSpareTail(n int) {
	b := make([]retrySlot, n)
	step := max(1, 4096/int(unsafe.Sizeof(retrySlot{})))
	for i := 0; i < n; i += step {
		b[i].hash = 1 // a write, so that the page is mapped here
	}
	select {
	case sm.spareTail <- b[:0]:
	default:
	}
}

// clock returns the time for the next batch: the local clock, never
// earlier than the latest record applied. It changes nothing: the time
// enters the state only with a record that carries it.
func (sm *stateMachine) clock(now int64) int64 { return max(now, sm.lastNow) }

// applyOp is the live path: it applies one queued operation at time now,
// answering a retried call from the retry cache, and returns the log
// record of a change that succeeded (nil for anything else: reads,
// failures, retries). An error means the record could not be encoded; the
// state then holds a change the log does not, and the server must stop.
func (sm *stateMachine) applyOp(o *op, now int64) ([]byte, error) {
	var rec *pb.LogRecord
	if o.gone {
		sm.forgetClient(o.client)
		if len(sm.sessions[o.client]) == 0 {
			return nil, nil // nothing open: nothing changes
		}
		rec = &pb.LogRecord{TimeNs: now, ClientId: o.client[:], SessionEnd: pb.SessionEnd_SESSION_END_CLIENT}
	} else {
		switch classOf(o.method) {
		case classSession, classMutation: // logged: below
		default:
			if isAuthMethod(o.method) {
				o.status, o.reply = sm.applyAuth(o.cred, o.method, o.req, now)
				return nil, nil
			}
			if sm.applyOps(o) {
				return nil, nil
			}
			if o.scope() != nil {
				if o.status = sm.confine(o, sm.grants); o.status != 0 {
					o.refused = true
					return nil, nil
				}
			}
			o.status, o.reply = apply(sm.eng, o.cred, o.method, o.req, now)
			if o.scope() != nil {
				sm.showReply(o, sm.grants)
			}
			return nil, nil
		}
		key := callKey{client: o.call.Client, call: o.call.ID}
		if prev, ok := sm.cache.get(key); ok {
			sm.retryHits.Add(1)
			o.status, o.reply = prev.status, prev.reply
			if o.scope() != nil {
				sm.showReply(o, sm.grants)
			}
			return nil, nil
		}
		if o.scope() != nil { // the confined request replaces the call's payload
			if o.status = sm.confine(o, sm.grants); o.status != 0 {
				o.refused = true
				return nil, nil
			}
		}
		rec = &pb.LogRecord{
			TimeNs: now, ClientId: key.client[:], CallId: key.call, Method: uint32(o.method),
			Uid: o.cred.UID, Gid: o.cred.GID, Groups: o.cred.Groups, Request: o.call.Payload,
		}
	}
	status, reply, err := sm.Apply(rec, o.req)
	if err != nil { // cannot happen: the record was made from a decoded call
		return nil, err
	}
	o.status, o.reply = status, reply
	if o.scope() != nil {
		sm.showReply(o, sm.grants)
	}
	if status != 0 {
		return nil, nil // failed: nothing changed, nothing to log
	}
	data, err := proto.Marshal(rec)
	if err != nil { // cannot happen for a well-formed message
		return nil, fmt.Errorf("encode log record: %w", err)
	}
	sm.sinceCkpt++
	return data, nil
}

// Apply applies one log record: the one step through which the state
// changes, on the live path, in replay and on a follower. req is the
// record's request already decoded (the live path has it), or nil to
// decode it from the record. A call that fails (status not 0) changes
// nothing; only records that succeeded are logged, so one that fails on
// replay means the state diverged. The record's time is the clock the
// state moves to; retry-cache entries expire by it. An error means the
// record is malformed.
func (sm *stateMachine) Apply(rec *pb.LogRecord, req proto.Message) (status uint32, reply proto.Message, err error) {
	now := rec.TimeNs
	var key callKey
	keyed := copy(key.client[:], rec.ClientId) == len(key.client)
	key.call = rec.CallId
	if rec.Settings != nil {
		sm.applySettings(rec.Settings)
	}
	switch rec.SessionEnd {
	case pb.SessionEnd_SESSION_END_NONE:
		if rec.Method == 0 && rec.Settings != nil {
			break // settings alone
		}
		m := pb.Method(rec.Method)
		class := classOf(m)
		if class != classMutation && class != classSession {
			return 0, nil, fmt.Errorf("method %d is not logged", rec.Method)
		}
		if req == nil {
			if req = protocol.NewRequest(m); req == nil {
				return 0, nil, fmt.Errorf("method %d has no request", rec.Method)
			}
			if err := proto.Unmarshal(rec.Request, req); err != nil {
				return 0, nil, fmt.Errorf("request: %w", err)
			}
		}
		cred := engine.Cred{UID: rec.Uid, GID: rec.Gid, Groups: rec.Groups}
		if rec.ScopeTop != 0 { // a scoped call confined before it was proposed
			if err := stillInside(sm.eng, engine.Ino(rec.ScopeTop), req); err != nil {
				return statusOf(err), errorDetail(err), nil
			}
		}
		if class == classSession {
			if !keyed {
				return 0, nil, fmt.Errorf("%s names no client", m)
			}
			status, reply = sm.applySession(key.client, cred, m, req, now)
			reply = withRefusal(sm.eng, status, reply)
		} else if isAuthMethod(m) {
			status, reply = sm.applyAuth(cred, m, req, now)
		} else {
			if rec.KeptOpen { // a record of a version that did not log OPEN and CLOSE
				sm.eng.HoldOrphans(true)
			}
			status, reply = apply(sm.eng, cred, m, req, now)
			sm.eng.HoldOrphans(false)
		}
		if status != 0 {
			return status, reply, nil
		}
		if keyed {
			sm.cache.put(key, outcome{method: m, status: status, reply: reply, at: now})
		}
	case pb.SessionEnd_SESSION_END_CLIENT:
		if !keyed {
			return 0, nil, errors.New("session end names no client")
		}
		sm.endSession(key.client, now)
	case pb.SessionEnd_SESSION_END_ALL:
		sm.endAllSessions(now)
	default:
		return 0, nil, fmt.Errorf("unknown session end %d", rec.SessionEnd)
	}
	sm.lastNow = max(sm.lastNow, now)
	if sm.cache.unstamped {
		sm.cache.stamp(now)
	}
	if sm.ttl > 0 {
		sm.cache.expire(sm.lastNow - sm.ttl)
	}
	sm.nextLSN++
	return status, reply, nil
}

// replayRecord is the replay path: it decodes one log record and applies
// it again.
func (sm *stateMachine) replayRecord(lsn uint64, data []byte) error {
	var rec pb.LogRecord
	if err := proto.Unmarshal(data, &rec); err != nil {
		return fmt.Errorf("record %d: %w", lsn, err)
	}
	status, _, err := sm.Apply(&rec, nil)
	if err != nil {
		return fmt.Errorf("record %d: %w", lsn, err)
	}
	if status != 0 {
		return fmt.Errorf("record %d: %s failed on replay: errno %d", lsn, pb.Method(rec.Method), status)
	}
	return nil
}

// sessions counts the files each client has open, so that a client whose
// connections all close has its opens released: a file it deleted while
// open is then freed. Part of the state machine: OPEN and CLOSE are
// logged, and the sessions are checkpointed (encodeState), so the
// engine's open counts, which are their sum, are too.
type sessions map[rpc.ClientID]map[engine.Ino]uint32

// applySession applies OPEN or CLOSE for client: OPEN counts the open
// against the client, CLOSE must match an open of the same client (EBADF
// otherwise).
func (sm *stateMachine) applySession(client rpc.ClientID, cred engine.Cred, m pb.Method, req proto.Message,
	now int64) (uint32, proto.Message) {
	if m == pb.Method_CLOSE {
		// A file opened by a number it had before a move: the open
		// counts under its number here, or the file is elsewhere.
		if moved := forwardInos(sm.eng, req); moved != nil {
			return movedReply(moved)
		}
		ino := engine.Ino(req.(*pb.NodeRequest).Ino)
		if sm.sessions[client][ino] == 0 {
			return uint32(syscall.EBADF), nil
		}
		status, reply := apply(sm.eng, cred, m, req, now)
		if status == 0 {
			sm.sessions.drop(client, ino)
		}
		return status, reply
	}
	status, reply := apply(sm.eng, cred, m, req, now)
	if status != 0 {
		return status, reply
	}
	ino := engine.Ino(reply.(*pb.AttrReply).Attr.Ino)
	files := sm.sessions[client]
	if files == nil {
		files = make(map[engine.Ino]uint32)
		sm.sessions[client] = files
	}
	files[ino]++
	return status, reply
}

// drop forgets one open of ino by client.
func (ss sessions) drop(client rpc.ClientID, ino engine.Ino) {
	files := ss[client]
	if files[ino] <= 1 {
		delete(files, ino)
		if len(files) == 0 {
			delete(ss, client)
		}
		return
	}
	files[ino]--
}

// sortedInos returns the inodes of files in order.
func sortedInos(files map[engine.Ino]uint32) []engine.Ino {
	inos := make([]engine.Ino, 0, len(files))
	for ino := range files {
		inos = append(inos, ino)
	}
	slices.Sort(inos)
	return inos
}

// sortedClients returns the clients with sessions in order.
func (ss sessions) sortedClients() []rpc.ClientID {
	clients := make([]rpc.ClientID, 0, len(ss))
	for c := range ss {
		clients = append(clients, c)
	}
	slices.SortFunc(clients, func(a, b rpc.ClientID) int { return bytes.Compare(a[:], b[:]) })
	return clients
}

// endSession closes every file client still has open, in inode order
// (what a close frees is part of the state, so the order must not be Go's
// map order). A file that lost its last link while open is freed at now.
func (sm *stateMachine) endSession(client rpc.ClientID, now int64) {
	files := sm.sessions[client]
	for _, ino := range sortedInos(files) {
		for range files[ino] {
			if err := sm.eng.Close(ino, now); err != nil {
				sm.log.Warn("close open of ended session", "client", client.String(), "ino", ino, "err", err)
			}
		}
	}
	delete(sm.sessions, client)
}

// endAllSessions ends every session, in client order, and frees every
// orphan left (those of a log or checkpoint written before OPEN and CLOSE
// were logged, which nobody has open).
func (sm *stateMachine) endAllSessions(now int64) {
	for _, client := range sm.sessions.sortedClients() {
		sm.endSession(client, now)
	}
	sm.eng.ReleaseOrphans(now)
}

// needsRestartRecord reports whether a restarted server must log the end
// of every session before serving: someone had a file open, or an orphan
// is left from an older log.
func (sm *stateMachine) needsRestartRecord() bool {
	return len(sm.sessions) > 0 || sm.eng.Orphans() > 0
}

// mustEncodeState is encodeState for a state that cannot fail to encode
// (the empty namespace of a new partition).
func (sm *stateMachine) mustEncodeState() [][]byte {
	body, err := sm.encodeState()
	if err != nil {
		panic(fmt.Sprintf("encode empty namespace: %v", err))
	}
	return body
}

// stateVersion marks the part of the checkpoint body that follows the
// retry cache: the clock, the cache entries' times and the sessions, from
// version 2 on the credentials, from version 3 on the settings.
// Checkpoints written before OPEN and CLOSE were logged end before it.
const stateVersion = 3

// encodeState encodes the checkpoint body, in parts to be written one
// after the other: the engine's namespace, length prefixed, then the
// retry cache (oldest first), then stateVersion, the clock, the cache
// entries' times in the same order, the sessions (clients in byte
// order, each one's files in inode order), the credentials (in name
// order, see encodeCreds) and the settings (encodeSettings). Nothing depends on Go's map
// order, so two state machines that applied the same records encode the
// same bytes. The namespace is kept in blocks (encodeBlocks), never
// copied to grow. It encodes everything on the caller's goroutine; the
// apply loop uses freezeState instead.
func (sm *stateMachine) encodeState() ([][]byte, error) {
	job, err := sm.freezeState()
	if err != nil {
		return nil, err
	}
	defer job.frozen.Release()
	if err := job.encode(); err != nil {
		return nil, err
	}
	return job.body, nil
}

// freezeState takes a checkpoint of the state at the last LSN applied,
// for the checkpointer to encode: it freezes the namespace
// (engine.Freeze, a hand-over), which checkpointJob.encode encodes on any
// goroutine. The retry cache is copied (its replies are never modified once
// stored) and encoded with the namespace, off the apply loop: marshalling
// its 65,536 replies was most of a checkpoint's pause. The sessions, the
// credentials and the settings, small, are encoded here.
func (sm *stateMachine) freezeState() (*checkpointJob, error) {
	rest, err := sm.encodeRest()
	if err != nil {
		return nil, err
	}
	cache := sm.cache.entries(sm.takeSpareTail())
	return &checkpointJob{lsn: sm.nextLSN - 1, frozen: sm.eng.Freeze(),
		tail: frozenTail{cache: cache, lastNow: sm.lastNow, rest: rest, spare: sm.spareTail}}, nil
}

// frozenTail is what follows the namespace in a checkpoint's body, taken
// at the freeze: the retry cache's entries (oldest first) and the clock,
// to be encoded, and the rest already encoded.
type frozenTail struct {
	cache   []retrySlot
	lastNow int64
	rest    []byte // the sessions, the credentials, the settings

	// spare takes cache back once it is encoded, for the next freeze to
	// copy into: memory fresh from the kernel costs a page fault a page
	// on first write, 12 ms for a full cache's 4 MB on this machine, and
	// on the apply loop.
	spare chan []retrySlot
}

// takeSpareTail returns a buffer an earlier checkpoint's tail has given
// back, or nil.
func (sm *stateMachine) takeSpareTail() []retrySlot {
	select {
	case b := <-sm.spareTail:
		return b
	default:
		return nil
	}
}

// encode encodes t (see stateMachine.encodeState for the layout).
func (t *frozenTail) encode() ([]byte, error) {
	var tail bytes.Buffer
	tail.Grow(16 + len(t.cache)*72 + len(t.rest))
	var num, reply []byte
	tail.Write(binary.AppendUvarint(num[:0], uint64(len(t.cache))))
	for _, c := range t.cache {
		reply = reply[:0]
		if c.out.reply != nil {
			var err error
			if reply, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(reply, c.out.reply); err != nil {
				return nil, err
			}
		}
		tail.Write(c.key.client[:])
		num = binary.AppendUvarint(num[:0], c.key.call)
		num = binary.AppendUvarint(num, uint64(c.out.status))
		num = binary.AppendUvarint(num, uint64(c.out.method))
		num = binary.AppendUvarint(num, uint64(len(reply)))
		tail.Write(num)
		tail.Write(reply)
	}
	tail.Write(binary.AppendUvarint(num[:0], stateVersion))
	tail.Write(binary.AppendVarint(num[:0], t.lastNow))
	for _, c := range t.cache {
		tail.Write(binary.AppendVarint(num[:0], c.out.at))
	}
	tail.Write(t.rest)
	if t.spare != nil {
		clear(t.cache) // the replies it holds may go
		select {
		case t.spare <- t.cache[:0]:
		default:
		}
		t.cache = nil
	}
	return tail.Bytes(), nil
}

// encodeRest encodes the part of the checkpoint body after the retry
// cache's times: the sessions, the credentials and the settings.
func (sm *stateMachine) encodeRest() ([]byte, error) {
	var tail bytes.Buffer
	var num []byte
	tail.Write(binary.AppendUvarint(num[:0], uint64(len(sm.sessions))))
	for _, client := range sm.sessions.sortedClients() {
		files := sm.sessions[client]
		tail.Write(client[:])
		tail.Write(binary.AppendUvarint(num[:0], uint64(len(files))))
		for _, ino := range sortedInos(files) {
			tail.Write(binary.AppendUvarint(num[:0], uint64(ino)))
			tail.Write(binary.AppendUvarint(num[:0], uint64(files[ino])))
		}
	}
	if err := sm.encodeCreds(&tail); err != nil {
		return nil, err
	}
	sm.encodeSettings(&tail)
	return tail.Bytes(), nil
}

// decodeState reads what encodeState wrote, and a checkpoint of the
// version before, which ends after the retry cache (its entries then
// count as made at the time of the first record applied after it; nobody
// has a file open).
func (sm *stateMachine) decodeState(r io.Reader) error {
	br := bufio.NewReaderSize(r, 256<<10)
	nsLen, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("namespace length: %w", err)
	}
	if sm.eng, err = engine.Load(io.LimitReader(br, int64(nsLen))); err != nil {
		return err
	}
	sm.fwd.follow(sm.eng)
	sm.eng.SetTrashDays(sm.unloggedDays)
	count, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("retry cache: %w", err)
	}
	keys := make([]callKey, 0, min(count, 1<<20))
	for range count {
		var k callKey
		if _, err := io.ReadFull(br, k.client[:]); err != nil {
			return fmt.Errorf("retry cache: %w", err)
		}
		var vals [4]uint64 // call id, status, method, reply length
		for i := range vals {
			if vals[i], err = binary.ReadUvarint(br); err != nil {
				return fmt.Errorf("retry cache: %w", err)
			}
		}
		k.call = vals[0]
		o := outcome{status: uint32(vals[1]), method: pb.Method(vals[2])}
		if vals[3] > maxCachedReply {
			return errors.New("retry cache: oversize reply")
		}
		if vals[3] > 0 {
			data := make([]byte, vals[3])
			if _, err := io.ReadFull(br, data); err != nil {
				return fmt.Errorf("retry cache: %w", err)
			}
			// Any method's reply: kept as unknown fields of an empty
			// message, which encodes them again byte for byte.
			reply := &pb.Empty{}
			if err := proto.Unmarshal(data, reply); err != nil {
				return fmt.Errorf("retry cache: %w", err)
			}
			o.reply = reply
		}
		sm.cache.put(k, o)
		keys = append(keys, k)
	}
	version, err := binary.ReadUvarint(br)
	if errors.Is(err, io.EOF) {
		sm.cache.unstamped = true // the version before: no times, no sessions
		return nil
	}
	if err != nil {
		return fmt.Errorf("state version: %w", err)
	}
	if version < 1 || version > stateVersion {
		return fmt.Errorf("state version %d: this server reads versions 1 to %d", version, stateVersion)
	}
	if sm.lastNow, err = binary.ReadVarint(br); err != nil {
		return fmt.Errorf("clock: %w", err)
	}
	for _, k := range keys {
		at, err := binary.ReadVarint(br)
		if err != nil {
			return fmt.Errorf("retry cache times: %w", err)
		}
		sm.cache.setTime(k, at)
	}
	clients, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	for range clients {
		var client rpc.ClientID
		if _, err := io.ReadFull(br, client[:]); err != nil {
			return fmt.Errorf("sessions: %w", err)
		}
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("sessions: %w", err)
		}
		files := make(map[engine.Ino]uint32, min(n, 1<<16))
		for range n {
			var vals [2]uint64 // inode, opens
			for i := range vals {
				if vals[i], err = binary.ReadUvarint(br); err != nil {
					return fmt.Errorf("sessions: %w", err)
				}
			}
			if vals[1] == 0 || vals[1] > 1<<32-1 {
				return fmt.Errorf("sessions: %d opens of %d", vals[1], vals[0])
			}
			ino := engine.Ino(vals[0])
			if err := sm.eng.RestoreOpens(ino, uint32(vals[1])); err != nil {
				return fmt.Errorf("sessions: open file %d: %w", ino, err)
			}
			files[ino] += uint32(vals[1])
		}
		if len(files) > 0 {
			sm.sessions[client] = files
		}
	}
	if version >= 2 {
		if err := sm.decodeCreds(br); err != nil {
			return err
		}
	}
	if version >= 3 {
		if err := sm.decodeSettings(br); err != nil {
			return err
		}
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		return errors.New("checkpoint: data after the state")
	}
	return nil
}
