package protocol

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
)

// Class says what a method does to a partition's state, which decides how
// the server queues, logs and retries it and how a router admits it.
type Class uint8

const (
	// ClassUnknown is every method number the protocol does not define.
	ClassUnknown Class = iota
	// ClassRead methods change nothing.
	ClassRead
	// ClassMutation methods change the namespace: the server logs them
	// before it answers, answers a retry from its retry cache, and queues
	// them with the writes; a router refuses them under a read-only mount.
	ClassMutation
	// ClassSession methods (OPEN, CLOSE) change what a client session
	// holds open, not the namespace.
	ClassSession
	// ClassLock methods take, test and release file locks held per client
	// session in the owning partition's memory.
	ClassLock
	// ClassLocal methods are answered by whoever receives them (a router
	// does not forward them).
	ClassLocal
)

var classNames = [...]string{"unknown", "read", "mutation", "session", "lock", "local"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown"
}

// Route says how a router finds the partition a call goes to.
type Route uint8

const (
	// RouteNone: the method is not routed (unknown methods).
	RouteNone Route = iota
	// RouteLocal: the router answers the call itself.
	RouteLocal
	// RouteRoot: the call goes to the root partition (the tables).
	RouteRoot
	// RouteOne: the call names one node, by the path or the inode in
	// field 1, and goes to the partition that owns it.
	RouteOne
	// RouteTwo: the call names two entries (RENAME, LINK), which must be
	// in one partition.
	RouteTwo
	// RouteNamespace: the call is about the whole namespace, which the
	// router answers from every partition (user and group quotas).
	RouteNamespace
	// RouteListing: the call names a directory whose answer may include
	// mount points below it (READDIR, SUMMARY, STATFS).
	RouteListing
)

// Info is what the protocol says of one method.
type Info struct {
	Class Class
	Route Route

	// request returns a new, empty message of the method's request type.
	request func() proto.Message
}

// Request message constructors, shared by the methods that take one type.
func nullReq() proto.Message          { return &pb.NullRequest{} }
func groupReq() proto.Message         { return &pb.GroupRequest{} }
func transferReq() proto.Message      { return &pb.GroupTransferRequest{} }
func entryReq() proto.Message         { return &pb.EntryRequest{} }
func nodeReq() proto.Message          { return &pb.NodeRequest{} }
func setattrReq() proto.Message       { return &pb.SetattrRequest{} }
func createReq() proto.Message        { return &pb.CreateRequest{} }
func renameReq() proto.Message        { return &pb.RenameRequest{} }
func linkReq() proto.Message          { return &pb.LinkRequest{} }
func readdirReq() proto.Message       { return &pb.ReaddirRequest{} }
func xattrReq() proto.Message         { return &pb.XattrRequest{} }
func allocReq() proto.Message         { return &pb.AllocSlicesRequest{} }
func commitReq() proto.Message        { return &pb.CommitRequest{} }
func concatReq() proto.Message        { return &pb.ConcatRequest{} }
func chunksReq() proto.Message        { return &pb.ReadChunksRequest{} }
func openReq() proto.Message          { return &pb.OpenRequest{} }
func compactReq() proto.Message       { return &pb.CompactRequest{} }
func slicesReq() proto.Message        { return &pb.ListSlicesRequest{} }
func purgeReq() proto.Message         { return &pb.PurgeRequest{} }
func lockReq() proto.Message          { return &pb.LockRequest{} }
func tablesReq() proto.Message        { return &pb.TablesRequest{} }
func tablesUpd() proto.Message        { return &pb.TablesUpdate{} }
func dumpReq() proto.Message          { return &pb.DumpRequest{} }
func statusReq() proto.Message        { return &pb.StatusRequest{} }
func announceReq() proto.Message      { return &pb.AnnounceRequest{} }
func authAdd() proto.Message          { return &pb.AuthAddRequest{} }
func authName() proto.Message         { return &pb.AuthNameRequest{} }
func authRotate() proto.Message       { return &pb.AuthRotateRequest{} }
func quotaSetReq() proto.Message      { return &pb.QuotaSetRequest{} }
func ownerQuotaSet() proto.Message    { return &pb.OwnerQuotaSetRequest{} }
func ownerQuotaReq() proto.Message    { return &pb.OwnerQuotaRequest{} }
func ownerQuotaAdjust() proto.Message { return &pb.OwnerQuotaAdjustRequest{} }
func groupAddReq() proto.Message      { return &pb.GroupAddRequest{} }
func hostStartReq() proto.Message     { return &pb.HostStartRequest{} }
func hostStopReq() proto.Message      { return &pb.HostStopRequest{} }
func groupRemoveReq() proto.Message   { return &pb.GroupRemoveRequest{} }
func emptyReq() proto.Message         { return &pb.Empty{} }
func authSync() proto.Message         { return &pb.AuthSyncRequest{} }
func trashRestore() proto.Message     { return &pb.TrashRestoreRequest{} }
func snapshotReq() proto.Message      { return &pb.SnapshotRequest{} }
func snapshotDiffReq() proto.Message  { return &pb.SnapshotDiffRequest{} }
func cloneReq() proto.Message         { return &pb.CloneRequest{} }
func trashPurge() proto.Message       { return &pb.TrashPurgeRequest{} }
func xprepareReq() proto.Message      { return &pb.XPrepareRequest{} }
func xintentReq() proto.Message       { return &pb.XIntentRequest{} }

// methods is the method table, indexed by method number. A method missing
// here is unknown to every role.
var methods = [...]Info{
	pb.Method_NULL: {ClassLocal, RouteLocal, nullReq},

	pb.Method_LOOKUP:      {ClassRead, RouteOne, entryReq},
	pb.Method_GETATTR:     {ClassRead, RouteOne, nodeReq},
	pb.Method_SETATTR:     {ClassMutation, RouteOne, setattrReq},
	pb.Method_MKDIR:       {ClassMutation, RouteOne, createReq},
	pb.Method_MKNOD:       {ClassMutation, RouteOne, createReq},
	pb.Method_UNLINK:      {ClassMutation, RouteOne, entryReq},
	pb.Method_RMDIR:       {ClassMutation, RouteOne, entryReq},
	pb.Method_RENAME:      {ClassMutation, RouteTwo, renameReq},
	pb.Method_LINK:        {ClassMutation, RouteTwo, linkReq},
	pb.Method_SYMLINK:     {ClassMutation, RouteOne, createReq},
	pb.Method_READLINK:    {ClassRead, RouteOne, nodeReq},
	pb.Method_READDIR:     {ClassRead, RouteListing, readdirReq},
	pb.Method_RESOLVE:     {ClassRead, RouteOne, nodeReq},
	pb.Method_STATFS:      {ClassRead, RouteListing, nodeReq},
	pb.Method_SUMMARY:     {ClassRead, RouteListing, nodeReq},
	pb.Method_GETXATTR:    {ClassRead, RouteOne, xattrReq},
	pb.Method_SETXATTR:    {ClassMutation, RouteOne, xattrReq},
	pb.Method_LISTXATTR:   {ClassRead, RouteOne, nodeReq},
	pb.Method_REMOVEXATTR: {ClassMutation, RouteOne, xattrReq},

	pb.Method_VOLUME:       {ClassRead, RouteOne, nodeReq},
	pb.Method_ALLOC_SLICES: {ClassMutation, RouteOne, allocReq},
	pb.Method_COMMIT:       {ClassMutation, RouteOne, commitReq},
	// COMMIT_SETATTR: the mount's close of a new small file, its data and
	// the chmod, chown and utimes it deferred in one change.
	pb.Method_COMMIT_SETATTR: {ClassMutation, RouteOne, commitReq},
	pb.Method_READ_CHUNKS:    {ClassRead, RouteOne, chunksReq},
	pb.Method_OPEN:           {ClassSession, RouteOne, openReq},
	pb.Method_CLOSE:          {ClassSession, RouteOne, nodeReq},
	// CREATE_OPEN creates a node and opens it: a session method (the
	// open is counted per client) that also changes the namespace.
	pb.Method_CREATE_OPEN:  {ClassSession, RouteOne, createReq},
	pb.Method_COMPACT:      {ClassMutation, RouteOne, compactReq},
	pb.Method_LIST_GARBAGE: {ClassRead, RouteOne, slicesReq},
	pb.Method_PURGE:        {ClassMutation, RouteOne, purgeReq},
	pb.Method_LIST_SLICES:  {ClassRead, RouteOne, slicesReq},
	// Inline slices: the bytes of small files kept by the partition until
	// they are stored as objects.
	pb.Method_LIST_INLINE:   {ClassRead, RouteOne, slicesReq},
	pb.Method_INLINE_STORED: {ClassMutation, RouteOne, purgeReq},

	pb.Method_GETLK:       {ClassLock, RouteOne, lockReq},
	pb.Method_SETLK:       {ClassLock, RouteOne, lockReq},
	pb.Method_SETLKW:      {ClassLock, RouteOne, lockReq},
	pb.Method_LOCK_CANCEL: {ClassLock, RouteOne, lockReq},
	pb.Method_HEARTBEAT:   {ClassLock, RouteOne, nodeReq},

	pb.Method_TABLES_GET:    {ClassRead, RouteRoot, tablesReq},
	pb.Method_TABLES_UPDATE: {ClassMutation, RouteRoot, tablesUpd},

	pb.Method_DUMP:               {ClassRead, RouteOne, dumpReq},
	pb.Method_STATUS:             {ClassRead, RouteOne, statusReq},
	pb.Method_ANNOUNCE:           {ClassRead, RouteOne, announceReq},
	pb.Method_AUTH_ADD:           {ClassMutation, RouteRoot, authAdd},
	pb.Method_AUTH_LIST:          {ClassRead, RouteRoot, authName},
	pb.Method_AUTH_REMOVE:        {ClassMutation, RouteRoot, authName},
	pb.Method_AUTH_ROTATE:        {ClassMutation, RouteRoot, authRotate},
	pb.Method_CONCAT:             {ClassMutation, RouteOne, concatReq},
	pb.Method_SESSION_END:        {ClassLocal, RouteLocal, emptyReq},
	pb.Method_AUTH_TABLE:         {ClassRead, RouteRoot, authName},
	pb.Method_AUTH_SYNC:          {ClassMutation, RouteOne, authSync},
	pb.Method_AUTH_WHOAMI:        {ClassRead, RouteRoot, emptyReq},
	pb.Method_SYNC:               {ClassRead, RouteOne, nodeReq},
	pb.Method_GROUP_STATUS:       {ClassLocal, RouteLocal, groupReq},
	pb.Method_GROUP_TRANSFER:     {ClassLocal, RouteLocal, transferReq},
	pb.Method_QUOTA_SET:          {ClassMutation, RouteOne, quotaSetReq},
	pb.Method_QUOTA_GET:          {ClassRead, RouteOne, nodeReq},
	pb.Method_QUOTA_LIST:         {ClassRead, RouteOne, nodeReq},
	pb.Method_QUOTA_REMOVE:       {ClassMutation, RouteOne, nodeReq},
	pb.Method_QUOTA_CHECK:        {ClassRead, RouteOne, nodeReq},
	pb.Method_QUOTA_REPAIR:       {ClassMutation, RouteOne, nodeReq},
	pb.Method_OWNER_QUOTA_ADJUST: {ClassMutation, RouteOne, ownerQuotaAdjust},
	pb.Method_OWNER_QUOTA_SET:    {ClassMutation, RouteNamespace, ownerQuotaSet},
	pb.Method_OWNER_QUOTA_LIST:   {ClassRead, RouteNamespace, ownerQuotaReq},
	pb.Method_OWNER_QUOTA_REMOVE: {ClassMutation, RouteNamespace, ownerQuotaReq},
	pb.Method_OWNER_QUOTA_CHECK:  {ClassRead, RouteNamespace, ownerQuotaReq},
	pb.Method_OWNER_QUOTA_REPAIR: {ClassMutation, RouteNamespace, ownerQuotaReq},
	pb.Method_GROUP_ADD:          {ClassLocal, RouteLocal, groupAddReq},
	pb.Method_GROUP_REMOVE:       {ClassLocal, RouteLocal, groupRemoveReq},
	pb.Method_HOST_START:         {ClassLocal, RouteLocal, hostStartReq},
	pb.Method_HOST_STOP:          {ClassLocal, RouteLocal, hostStopReq},
	pb.Method_HOST_LIST:          {ClassLocal, RouteLocal, emptyReq},
	pb.Method_TRASH_LIST:         {ClassRead, RouteOne, nodeReq},
	pb.Method_TRASH_RESTORE:      {ClassMutation, RouteOne, trashRestore},
	pb.Method_TRASH_PURGE:        {ClassMutation, RouteOne, trashPurge},
	pb.Method_SNAPSHOT_CREATE:    {ClassMutation, RouteOne, snapshotReq},
	pb.Method_SNAPSHOT_LIST:      {ClassRead, RouteOne, nodeReq},
	pb.Method_SNAPSHOT_REMOVE:    {ClassMutation, RouteOne, snapshotReq},
	pb.Method_SNAPSHOT_DIFF:      {ClassRead, RouteOne, snapshotDiffReq},
	pb.Method_CLONE:              {ClassMutation, RouteTwo, cloneReq},

	pb.Method_XRENAME_PREPARE_SRC: {ClassMutation, RouteOne, xprepareReq},
	pb.Method_XRENAME_PREPARE_DST: {ClassMutation, RouteOne, xprepareReq},
	pb.Method_XRENAME_COMMIT_SRC:  {ClassMutation, RouteOne, xintentReq},
	pb.Method_XRENAME_COMMIT_DST:  {ClassMutation, RouteOne, xintentReq},
	pb.Method_XRENAME_ABORT:       {ClassMutation, RouteOne, xintentReq},
	pb.Method_XRENAME_FORGET:      {ClassMutation, RouteOne, xintentReq},
	pb.Method_XRENAME_STATE:       {ClassRead, RouteOne, xintentReq},
	pb.Method_XRENAME_LIST:        {ClassRead, RouteOne, xintentReq},
}

// Lookup returns what the protocol says of method m; the zero Info
// (ClassUnknown, RouteNone) for a method it does not define.
func Lookup(m pb.Method) Info {
	if m < 0 || int(m) >= len(methods) {
		return Info{}
	}
	return methods[m]
}

// ClassOf returns m's class.
func ClassOf(m pb.Method) Class { return Lookup(m).Class }

// IsMutation reports whether m changes the namespace (ClassMutation).
func IsMutation(m pb.Method) bool { return ClassOf(m) == ClassMutation }

// RouterOnly reports whether m is a step of the protocols routers run
// between partitions (the XRENAME_* steps of a rename across partitions,
// and OWNER_QUOTA_ADJUST, which moves a namespace quota's limits between
// partitions): a router refuses it from a client, and a partition takes
// it only from a router or an admin credential. Its requests carry node
// images or limits, which a client must not be able to write.
func RouterOnly(m pb.Method) bool {
	return m >= pb.Method_XRENAME_PREPARE_SRC && m <= pb.Method_XRENAME_LIST || m == pb.Method_OWNER_QUOTA_ADJUST
}

// NewRequest returns a new, empty message of m's request type, or nil
// for a method the protocol does not define.
func NewRequest(m pb.Method) proto.Message {
	if f := Lookup(m).request; f != nil {
		return f()
	}
	return nil
}

// Known reports whether the protocol defines m.
func Known(m pb.Method) bool { return ClassOf(m) != ClassUnknown }
