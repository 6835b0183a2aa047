// Package pgstate keeps the proxy's state in PostgreSQL, so that several
// proxies (replicas behind a load balancer) share exact counts, holds,
// no-downgrade marks and one audit chain.
//
// The database holds the journal itself: table planlock_audit has one row
// per record, the same chained and hashed line the journal file holds
// (ledger.Machine writes and reads both), and planlock_head the chain's
// head. Every change is one transaction that locks the head row, reads the
// records other replicas appended since this one last looked, decides
// against that state (the order rule, max_calls, a hold's state), appends
// its records and moves the head, and commits before the caller goes on: a
// call is forwarded only once its count and its audit record are committed,
// as one fact. The head lock serializes the replicas' decisions; since the
// chain is linear, every writer has to serialize on its end anyway. Calls
// arriving together at one replica share one transaction (group commit).
//
// Fail closed: while the database cannot be reached, every change returns
// an error naming it (ErrUnavailable) and the proxy forwards nothing;
// holds stay as they were. The connection pool reconnects by itself, so
// service resumes when the database is back. A replica that dies has its
// open transaction rolled back by the server when the connection drops (or
// after idle_in_transaction_session_timeout when the network, not the
// process, is gone); every call it forwarded was counted before, alone or
// in a lease, and its leases are settled as used at their expiry (lease.go).
package pgstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/planlock/planlock/proxy/ledger"
)

// ErrUnavailable: the database could not be reached or the transaction
// failed; nothing was decided (or, when a commit's outcome is unknown, a
// count may have been taken but the call is not forwarded).
var ErrUnavailable = errors.New("state database unavailable")

// IsURL reports whether a --state value names a PostgreSQL database.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Options configure Open.
type Options struct {
	URL string
	// Redact stores the sha256 of the canonical arguments instead of the arguments.
	Redact bool
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Timeout bounds each transaction, connecting included: past it a call
	// is refused rather than kept waiting. Zero means 5s.
	Timeout time.Duration
	// NoLeases counts every call in its own transaction (the file ledger's
	// SyncEachCall): no call is counted ahead.
	NoLeases bool
	// LeaseTTL is how long a lease is this replica's (zero: 10s). It uses a
	// lease for half of it and returns what is left; past it any replica
	// settles what was not recorded as used (its replica is presumed dead).
	LeaseTTL time.Duration
	// Replica names this proxy in its lease records; empty means
	// host-pid-random.
	Replica string
	// StateKey and AcceptUnkeyedState are ledger.Options' for the shared
	// state: with a key every record appended carries its MAC, and a
	// record another writer appended without one (after the first that
	// has one), or with a MAC that does not verify, stops this replica as
	// an edited record does. Every replica needs the same key.
	StateKey           *ledger.StateKey
	AcceptUnkeyedState bool
}

// Store is an open PostgreSQL state. Its methods are safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	where   string
	redact  bool
	now     func() time.Time
	timeout time.Duration
	key     *ledger.StateKey

	mu sync.Mutex      // guards m and sent; held for a whole transaction
	m  *ledger.Machine // nil: replay from the start at next use
	// sent maps a leased call to its allow record's seq, for its outcome's ref.
	sent map[callKey]uint64
	// failures counts the transactions that failed: a failed batch may have
	// lost the records of leased calls that were forwarded, so a lease
	// granted before a failure is never returned, only settled as used.
	failures uint64

	leasing  bool
	replica  string
	leaseTTL time.Duration
	lmu      sync.Mutex // guards grants, leaseOff and done; taken after mu, before qmu
	grants   map[stepKey]*grant
	leaseOff bool
	// done marks, by plan digest, the steps whose success this replica
	// posted (a leased call's outcome): they count at once, as the file
	// ledger's outcomes do, before the record is committed. A step's
	// success is never undone, so the marks stay.
	done map[string][]bool

	// lastFail is the newest failed transaction's error and when, for a
	// waiter that runs out of time behind it.
	fmu      sync.Mutex
	lastFail error
	failAt   time.Time

	qmu     sync.Mutex
	queue   []*op
	closed  bool
	kick    chan struct{}
	stopped chan struct{}
}

type op struct {
	fn   func(m *ledger.Machine, now time.Time) error
	err  error
	done chan struct{}
	// retry: the record of a call already forwarded (its outcome). It is
	// never dropped: a failed transaction queues it again, on a new
	// connection, until it commits or the store closes.
	retry bool
	// deadline is when its waiter gives up (zero: nobody waits, or a
	// retried record): the transaction that carries it ends by then.
	deadline time.Time
	// state: opQueued, opRunning, opDecided (its change is in the
	// transaction, which commits or fails by the deadline) or opAbandoned
	// (its waiter gave up before that: it is not run).
	state atomic.Int32
}

const (
	opQueued int32 = iota
	opRunning
	opDecided
	opAbandoned
)

// Describe names the database of a URL without its password, for messages.
func Describe(url string) string {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return "the PostgreSQL state (URL not valid)"
	}
	return fmt.Sprintf("PostgreSQL database %q on %s:%d", cfg.Database, cfg.Host, cfg.Port)
}

// sessionParams are set on every connection: a commit is durable before
// it returns (whatever the server's default), and a transaction left open by
// a replica cut off from the network is rolled back, releasing the head.
// Open adds lock_timeout and statement_timeout from Options.Timeout.
var sessionParams = map[string]string{
	"synchronous_commit":                  "on",
	"idle_in_transaction_session_timeout": "10000",
	"application_name":                    "planlock",
}

func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("--state: not a valid PostgreSQL URL: %v", redactURL(err.Error(), url))
	}
	for k, v := range sessionParams {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: connect to %s: %v", ErrUnavailable, Describe(url), redactURL(err.Error(), url))
	}
	return conn, nil
}

// redactURL keeps a password in the URL out of an error message.
func redactURL(msg, url string) string {
	if cfg, err := pgconn.ParseConfig(url); err == nil && cfg.Password != "" {
		msg = strings.ReplaceAll(msg, cfg.Password, "xxxxx")
	}
	return msg
}

// Open connects, checks the schema and replays the journal. The caller must Close it.
func Open(ctx context.Context, o Options) (*Store, error) {
	where := Describe(o.URL)
	conn, err := connect(ctx, o.URL)
	if err != nil {
		return nil, err
	}
	err = checkSchema(ctx, conn, where)
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		return nil, fmt.Errorf("--state: %v", redactURL(err.Error(), o.URL))
	}
	for k, v := range sessionParams {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	s := &Store{where: where, redact: o.Redact, now: o.Now, timeout: o.Timeout, key: o.StateKey,
		kick: make(chan struct{}, 1), stopped: make(chan struct{}),
		leasing: !o.NoLeases, replica: o.Replica, leaseTTL: o.LeaseTTL,
		grants: map[stepKey]*grant{}, sent: map[callKey]uint64{}, done: map[string][]bool{}}
	if s.replica == "" {
		s.replica = replicaID()
	}
	if s.leaseTTL <= 0 {
		s.leaseTTL = 10 * time.Second
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.timeout <= 0 {
		s.timeout = 5 * time.Second
	}
	// Every wait inside the server is bounded, so that a lock held by
	// someone else (a foreign session idle in a transaction on the head
	// row) ends in an error naming it within the attempt's time, not in a
	// client-side timeout: the lock wait at half of it (a call queued behind
	// a blocked transaction still gets its own attempt in time), any one
	// statement at three quarters.
	// Each transaction sets its own lock_timeout from its deadline (runTx).
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = fmt.Sprint(max(s.timeout/2, time.Millisecond).Milliseconds())
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(max(s.timeout, time.Millisecond).Milliseconds())
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > s.timeout {
		cfg.ConnConfig.ConnectTimeout = s.timeout
	}
	cfg.MaxConns = 4 // one writer, a few readers
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, where, redactURL(err.Error(), o.URL))
	}
	s.mu.Lock()
	err = s.open(ctx)
	if err == nil {
		err = s.m.CheckStateKey(where, o.AcceptUnkeyedState)
	}
	switchKey := err == nil && o.StateKey != nil && s.m.KeySwitchDue()
	s.mu.Unlock()
	if err != nil {
		s.pool.Close()
		return nil, err
	}
	go s.writer()
	if switchKey {
		// Decided again in the transaction: another replica may have
		// written it meanwhile.
		if err := s.do(ctx, func(m *ledger.Machine, now time.Time) error { m.KeySwitch(now); return nil }); err != nil {
			s.Close()
			return nil, fmt.Errorf("write the state_key record: %w", err)
		}
	}
	// Settle the leases of replicas that died (past their expiry) now
	// rather than at the next change.
	s.mu.Lock()
	open := s.m.OpenLeases()
	s.mu.Unlock()
	if open > 0 {
		if err := s.do(ctx, func(*ledger.Machine, time.Time) error { return nil }); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close returns this replica's leases, stops the writer (after the queued
// changes) and closes the pool.
func (s *Store) Close() error {
	s.lmu.Lock()
	wasOff := s.leaseOff
	s.leaseOff = true
	for k := range s.grants {
		s.dropLocked(k)
	}
	s.lmu.Unlock()
	if !wasOff && s.leasing {
		// Wait for the returns (and the leased calls' records before them).
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		_ = s.do(ctx, func(*ledger.Machine, time.Time) error { return nil })
		cancel()
	}
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return nil
	}
	s.closed = true
	s.qmu.Unlock()
	s.signal()
	<-s.stopped
	s.pool.Close()
	return nil
}

func (s *Store) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// do queues one change and waits for its transaction, at most the
// store's timeout (queueing included). A ctx cancelled early returns, but
// the change may still commit.
func (s *Store) do(ctx context.Context, fn func(m *ledger.Machine, now time.Time) error) error {
	return s.doOp(ctx, &op{fn: fn, done: make(chan struct{})})
}

// doRetry is do for the record of a call already forwarded: a failed
// transaction does not drop it (op.retry); the wait is bounded as do's.
func (s *Store) doRetry(ctx context.Context, fn func(m *ledger.Machine, now time.Time) error) error {
	return s.doOp(ctx, &op{fn: fn, done: make(chan struct{}), retry: true})
}

func (s *Store) doOp(ctx context.Context, o *op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !o.retry {
		o.deadline = time.Now().Add(s.timeout)
	}
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return ledger.ErrClosed
	}
	s.queue = append(s.queue, o)
	s.qmu.Unlock()
	s.signal()
	return s.wait(ctx, o)
}

// abandon gives o up unless its change is already decided in a
// transaction; false when it is (that transaction ends by o's deadline).
func (o *op) abandon() bool {
	return o.state.CompareAndSwap(opQueued, opAbandoned) || o.state.CompareAndSwap(opRunning, opAbandoned)
}

// wait waits for o's transaction, at most the store's timeout. A change
// not decided by then is abandoned (never run) unless it is a retried
// record; one already decided is waited for, its transaction bounded by
// the same deadline.
func (s *Store) wait(ctx context.Context, o *op) error {
	start := time.Now()
	d := s.timeout
	if !o.deadline.IsZero() {
		d = time.Until(o.deadline)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		if o.retry || o.abandon() {
			return ctx.Err()
		}
		<-o.done
		return o.err
	case <-timer.C:
	}
	if !o.retry && !o.abandon() {
		<-o.done
		return o.err
	}
	what := "no transaction committed"
	s.fmu.Lock()
	if s.lastFail != nil && !s.failAt.Before(start.Add(-s.timeout)) {
		what = s.lastFail.Error()
	}
	s.fmu.Unlock()
	if o.retry {
		return fmt.Errorf("%w: %s: not recorded within %s (%s); it stays queued and is retried", ErrUnavailable, s.where, s.timeout, what)
	}
	return fmt.Errorf("%w: %s: not decided within %s (%s)", ErrUnavailable, s.where, s.timeout, what)
}

func (s *Store) writer() {
	defer close(s.stopped)
	// The records of leased calls (posted, nobody waits) are appended at
	// least every postFlush, or as soon as a change someone waits for
	// queues, or postBatch of them queued.
	tick := time.NewTicker(postFlush)
	defer tick.Stop()
	for {
		select {
		case <-s.kick:
		case <-tick.C:
		}
		s.qmu.Lock()
		ops, closing := s.queue, s.closed
		s.queue = nil
		s.qmu.Unlock()
		if len(ops) > 0 {
			s.run(ops)
		}
		if closing {
			s.qmu.Lock()
			rest := s.queue
			s.queue = nil
			s.qmu.Unlock()
			for _, o := range rest {
				o.err = ledger.ErrClosed
				if o.done != nil {
					close(o.done)
				}
			}
			return
		}
	}
}

// run decides and commits a group of changes in one transaction. The
// records of forwarded calls (op.retry) in a transaction that failed are
// queued again, ahead of what queued meanwhile.
func (s *Store) run(ops []*op) {
	dl := time.Now().Add(s.timeout)
	live := ops[:0]
	for _, o := range ops {
		if o.state.CompareAndSwap(opQueued, opRunning) || o.retry {
			o.state.Store(opRunning)
			live = append(live, o)
			if !o.deadline.IsZero() && o.deadline.Before(dl) {
				dl = o.deadline
			}
		} else if o.done != nil {
			close(o.done) // its waiter gave up: not run
		}
	}
	ops = live
	if len(ops) == 0 {
		return
	}
	// A fifth of the time is kept for naming a lock's holder (lockHolder).
	ctx, cancel := context.WithDeadline(context.Background(), dl.Add(-s.timeout/5))
	defer cancel()
	s.mu.Lock()
	err := s.runTx(ctx, ops)
	if err != nil {
		// The state may hold changes that did not commit: replay at next use.
		s.m = nil
		s.failures++
		// Fail closed: no call inside a lease until a transaction commits
		// again; the leases are settled as used at their expiry.
		s.lmu.Lock()
		clear(s.grants)
		s.lmu.Unlock()
	}
	s.mu.Unlock()
	var again []*op
	for _, o := range ops {
		if err != nil && o.retry {
			o.err = nil
			o.state.Store(opQueued)
			again = append(again, o)
			continue
		}
		if err != nil && o.err == nil {
			o.err = err
		}
		if o.done != nil {
			close(o.done)
		}
	}
	if err != nil {
		s.fmu.Lock()
		s.lastFail, s.failAt = err, time.Now()
		s.fmu.Unlock()
	}
	if len(again) > 0 {
		s.qmu.Lock()
		s.queue = append(again, s.queue...)
		s.qmu.Unlock()
	}
}

func (s *Store) unavailable(what string, err error) error {
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ledger.ErrAnchor) || errors.Is(err, ledger.ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w: %s: %s: %v", ErrUnavailable, s.where, what, err)
}

// runTx: lock the head, catch up, decide, append, commit, in two round
// trips (each a pipelined batch) and one WAL flush. Call with mu held.
func (s *Store) runTx(ctx context.Context, ops []*op) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.unavailable("connect", err)
	}
	// A connection left inside a transaction by an error is closed, not
	// reused, by the pool.
	defer conn.Release()
	if s.m == nil {
		s.m = s.newMachine()
	}
	// 1: begin, lock the head, and read what other replicas appended
	// since this one last looked (READ COMMITTED: the read runs after the
	// lock is held, so it sees every record up to the head).
	var head ledger.Head
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// The lock wait ends inside the deadline, with an error the server
	// names, leaving time to find the holder (lockHolder).
	lockWait := time.Until(deadline(ctx)) * 3 / 5
	b.Queue(fmt.Sprintf("SET LOCAL lock_timeout = %d", max(lockWait.Milliseconds(), 1)))
	b.Queue("SELECT seq, hash FROM planlock_head FOR UPDATE")
	b.Queue("SELECT seq, line FROM planlock_audit WHERE seq > $1 ORDER BY seq", int64(s.m.Head().Seq))
	br := conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return s.lockErr(ctx, "begin", err)
	}
	if _, err := br.Exec(); err != nil {
		br.Close()
		return s.lockErr(ctx, "begin", err)
	}
	if err := br.QueryRow().Scan(&head.Seq, &head.Hash); err != nil {
		br.Close()
		return s.lockErr(ctx, "lock the head", err)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return s.unavailable("read audit records", err)
	}
	err = s.applyRows(rows)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = s.unavailable("read audit records", cerr)
	}
	if err != nil {
		return err
	}
	if err := s.checkHead(head); err != nil {
		return err
	}
	now := s.now()
	if s.m.OpenLeases() > 0 {
		// Leases past their expiry: their replicas are presumed dead.
		if _, err := s.m.SettleLeases("", now); err != nil {
			return s.unavailable("settle expired leases", err)
		}
	}
	for _, o := range ops {
		if !o.retry && !o.state.CompareAndSwap(opRunning, opDecided) {
			o.err = fmt.Errorf("%w: %s: not decided within %s", ErrUnavailable, s.where, s.timeout)
			continue // its waiter gave up
		}
		o.err = o.fn(s.m, now)
	}
	s.refreshGrants()
	lines := s.m.TakeLines()
	// 2: append, move the head, commit.
	b = &pgx.Batch{}
	if len(lines) > 0 {
		seqs := make([]int64, len(lines))
		texts := make([]string, len(lines))
		for i, l := range lines {
			seqs[i], texts[i] = int64(head.Seq)+1+int64(i), string(l)
		}
		h := s.m.Head()
		b.Queue("INSERT INTO planlock_audit (seq, line) SELECT * FROM unnest($1::bigint[], $2::text[])", seqs, texts)
		b.Queue("UPDATE planlock_head SET seq = $1, hash = $2", int64(h.Seq), h.Hash)
	}
	b.Queue("COMMIT")
	br = conn.SendBatch(ctx, b)
	defer br.Close()
	if len(lines) > 0 {
		if _, err := br.Exec(); err != nil {
			return s.unavailable("append audit records", err)
		}
		if _, err := br.Exec(); err != nil {
			return s.unavailable("move the head", err)
		}
	}
	tag, err := br.Exec()
	if err == nil && tag.String() != "COMMIT" {
		err = fmt.Errorf("the transaction was rolled back (%s)", tag)
	}
	if err != nil {
		return s.unavailable("commit", err)
	}
	return nil
}

// applyRows applies stored records, each of which must be the next of the
// chain. Call with mu held.
func (s *Store) applyRows(rows pgx.Rows) error {
	var seq int64
	var line string
	_, err := pgx.ForEachRow(rows, []any{&seq, &line}, func() error {
		if uint64(seq) != s.m.Head().Seq+1 {
			return fmt.Errorf("%w: %s: record %d missing from planlock_audit", ledger.ErrCorrupt, s.where, s.m.Head().Seq+1)
		}
		if err := s.m.Apply([]byte(line)); err != nil {
			return fmt.Errorf("%w: %s: record %d: %v", ledger.ErrCorrupt, s.where, seq, err)
		}
		return nil
	})
	if err != nil {
		s.m = nil
		return s.unavailable("read audit records", err)
	}
	return nil
}

// checkHead compares the state with the head row. Call with mu held.
func (s *Store) checkHead(head ledger.Head) error {
	if got := s.m.Head(); got != head {
		s.m = nil
		return fmt.Errorf("%w: %s: planlock_audit ends at seq %d hash %s, its head row says seq %d hash %s: the audit table was cut or rewritten",
			ledger.ErrAnchor, s.where, got.Seq, got.Hash, head.Seq, head.Hash)
	}
	return nil
}

// refresh reads the records committed since the state's head, in one
// query and without a lock: commits are serialized by the head lock, so
// the committed records are always a prefix of the chain. Call with mu held.
func (s *Store) refresh(ctx context.Context) error {
	if s.m == nil {
		s.m = s.newMachine()
	}
	rows, err := s.pool.Query(ctx, "SELECT seq, line FROM planlock_audit WHERE seq > $1 ORDER BY seq", int64(s.m.Head().Seq))
	if err != nil {
		return s.unavailable("read audit records", err)
	}
	return s.applyRows(rows)
}

// open reads the whole journal and checks it ends at the head row.
func (s *Store) open(ctx context.Context) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// Reading a whole journal may take longer than one attempt.
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
			return s.unavailable("read the head", err)
		}
		var head ledger.Head
		if err := tx.QueryRow(ctx, "SELECT seq, hash FROM planlock_head").Scan(&head.Seq, &head.Hash); err != nil {
			return s.unavailable("read the head", err)
		}
		s.m = s.newMachine()
		rows, err := tx.Query(ctx, "SELECT seq, line FROM planlock_audit ORDER BY seq")
		if err != nil {
			return s.unavailable("read audit records", err)
		}
		if err := s.applyRows(rows); err != nil {
			return err
		}
		return s.checkHead(head)
	})
}

// read runs fn on the newest state it can get: when the database cannot be
// reached it falls back to the last state read (reads decide nothing: every
// change is decided again in its transaction).
func (s *Store) read(fn func(m *ledger.Machine, now time.Time)) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.refresh(ctx)
	m := s.m
	if m == nil {
		m = s.newMachine()
	}
	fn(m, s.now())
}

// Reserve takes one call of the step; the call may be forwarded only on a
// nil error, once its count is committed: its own allow record, or the
// lease that covers it (see lease.go).
func (s *Store) Reserve(ctx context.Context, rv ledger.Reservation) (ledger.Ticket, error) {
	if s.leasing && rv.HoldID == "" && !rv.OverLimit {
		if t, o, ok, err := s.leased(rv); ok || err != nil {
			if err == nil {
				// Forwarded only once its allow record is committed: a
				// failed batch then refuses the call instead of losing
				// the record of a call that ran.
				err = s.wait(ctx, o)
			}
			if err != nil {
				return ledger.Ticket{}, err
			}
			return t, nil
		}
	}
	var t ledger.Ticket
	err := s.do(ctx, func(m *ledger.Machine, now time.Time) error {
		var err error
		if !s.leasing {
			t, err = m.Reserve(s.localCheck(rv), now)
			return err
		}
		t, err = s.reserveTx(m, rv, now)
		return err
	})
	if err != nil {
		return ledger.Ticket{}, err
	}
	return t, nil
}

// Complete records the upstream's outcome of a reserved call. The outcome
// of a leased call is appended with the next batch, unless it puts the step
// on hold, which must be committed before Complete returns. The call was
// forwarded: a failed transaction never drops its outcome, which is
// retried (on a new connection) until it commits or the store closes.
func (s *Store) Complete(ctx context.Context, t ledger.Ticket, o ledger.Outcome) error {
	if t.Seq == 0 && s.leasing {
		looked := false
		fn := func(m *ledger.Machine, now time.Time) error {
			if !looked { // once: a retry keeps the ref found the first time
				k := callKey{t.PlanDigest, t.StepIndex, t.Used}
				t.Seq, looked = s.sent[k], true // its allow record committed before the call was forwarded
				delete(s.sent, k)
			}
			return m.Complete(t, o, now)
		}
		if !o.HoldStep {
			if o.OK && t.StepIndex >= 0 {
				s.markDone(t.PlanDigest, t.StepIndex)
			}
			s.postRetry(fn)
			return nil
		}
		s.dropGrant(stepKey{t.PlanDigest, t.StepIndex})
		return s.doRetry(ctx, fn)
	}
	return s.doRetry(ctx, func(m *ledger.Machine, now time.Time) error { return m.Complete(t, o, now) })
}

// Block records a blocked call.
func (s *Store) Block(ctx context.Context, c ledger.Call, reason string) error {
	return s.do(ctx, func(m *ledger.Machine, now time.Time) error { return m.Block(c, reason, now) })
}

// Input records a multi-round call's answers (ledger.Ledger.Input).
func (s *Store) Input(ctx context.Context, c ledger.Call, ref uint64, round int, what string) error {
	return s.do(ctx, func(m *ledger.Machine, now time.Time) error { return m.Input(c, ref, round, what, now) })
}

// Observe records an observed call (observe mode).
func (s *Store) Observe(ctx context.Context, c ledger.Call, decision, reason string) error {
	return s.do(ctx, func(m *ledger.Machine, now time.Time) error { return m.Observe(c, decision, reason, now) })
}

// NewHold records a held call, or finds the open hold for it again.
func (s *Store) NewHold(ctx context.Context, c ledger.Call, spec ledger.HoldSpec) (ledger.Hold, error) {
	var h ledger.Hold
	err := s.do(ctx, func(m *ledger.Machine, now time.Time) error {
		var err error
		h, err = m.NewHold(c, spec, now)
		return err
	})
	if err != nil {
		return ledger.Hold{}, err
	}
	return h, nil
}

// UpdateHold approves or rejects a pending hold and/or sets its PR URL.
func (s *Store) UpdateHold(ctx context.Context, id string, u ledger.HoldUpdate) (ledger.Hold, error) {
	var h ledger.Hold
	err := s.do(ctx, func(m *ledger.Machine, now time.Time) error {
		var err error
		h, err = m.UpdateHold(id, u, now)
		return err
	})
	if err != nil {
		return ledger.Hold{}, err
	}
	return h, nil
}

// LoadPlan applies the no-downgrade rule across all replicas and records the load.
func (s *Store) LoadPlan(ctx context.Context, p ledger.PlanLoad) error {
	return s.do(ctx, func(m *ledger.Machine, now time.Time) error { return m.LoadPlan(p, now) })
}

// Progress returns the plan's order state and counts.
func (s *Store) Progress(planDigest string) (p ledger.Progress) {
	s.read(func(m *ledger.Machine, _ time.Time) {
		p = m.Progress(planDigest)
		s.lmu.Lock()
		p = s.localLocked(planDigest, p)
		s.lmu.Unlock()
	})
	return p
}

// FindHold returns the newest hold for exactly this call.
func (s *Store) FindHold(c ledger.Call) (h ledger.Hold, ok bool) {
	s.read(func(m *ledger.Machine, now time.Time) { h, ok = m.FindHold(c, now) })
	return h, ok
}

// GetHold returns a hold by id.
func (s *Store) GetHold(id string) (h ledger.Hold, ok bool) {
	s.read(func(m *ledger.Machine, now time.Time) { h, ok = m.GetHold(id, now) })
	return h, ok
}

// ListHolds returns all holds in creation order.
func (s *Store) ListHolds() (hs []ledger.Hold) {
	s.read(func(m *ledger.Machine, now time.Time) { hs = m.ListHolds(now) })
	return hs
}

// Head is the chain's head as this replica last saw it.
func (s *Store) Head() ledger.Head {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return ledger.Head{}
	}
	return s.m.Head()
}

// Where names the database, without credentials.
func (s *Store) Where() string { return s.where }

// lockErr is the error of a transaction that could not lock the head: a
// lock wait that timed out (on the server, or the deadline while a
// statement waited, preparing included) names the lock and its holder.
func (s *Store) lockErr(ctx context.Context, what string, err error) error {
	if !isLockWait(err) && !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) {
		return s.unavailable(what, err)
	}
	named := s.lockHolder(ctx, err)
	if isLockWait(err) || named != err {
		return s.unavailable("lock wait timeout on the head row (planlock_head)", named)
	}
	return s.unavailable(what, err)
}

// isLockWait reports whether err ended a wait for a lock: lock_timeout, or
// statement_timeout while the statement waited.
func isLockWait(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "55P03" || pe.Code == "57014")
}

// lockHolder names who holds the head row, as far as the planlock role
// may read it (pg_locks is readable by every role; pg_stat_activity shows
// every session's pid and application_name, the rest only with
// pg_read_all_stats): the sessions holding a lock on planlock_head that
// are not themselves waiting for one. Without that, err as it is.
func (s *Store) lockHolder(ctx context.Context, err error) error {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(s.timeout/6, 50*time.Millisecond))
	defer cancel()
	rows, qerr := s.pool.Query(qctx, `SELECT l.pid, coalesce(a.application_name, ''), coalesce(a.state, '')
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'relation' AND l.relation = 'planlock_head'::regclass AND l.granted
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND l.pid <> pg_backend_pid()
		  AND NOT EXISTS (SELECT 1 FROM pg_locks w WHERE w.pid = l.pid AND NOT w.granted)
		ORDER BY a.xact_start NULLS LAST, l.pid LIMIT 3`)
	if qerr != nil {
		return err
	}
	var pid int32
	var app, state string
	var who []string
	_, qerr = pgx.ForEachRow(rows, []any{&pid, &app, &state}, func() error {
		w := fmt.Sprintf("pid %d", pid)
		if app != "" {
			w += fmt.Sprintf(" (application_name %q)", app)
		}
		if state != "" {
			w += ", " + state
		}
		who = append(who, w)
		return nil
	})
	if qerr != nil || len(who) == 0 {
		return err
	}
	return fmt.Errorf("held by %s: %v", strings.Join(who, "; "), err)
}

// deadline is ctx's deadline; ctx always has one here.
func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// newMachine is an empty state that decides under the store's state key.
func (s *Store) newMachine() *ledger.Machine {
	m := ledger.NewMachine(s.redact)
	m.UseStateKey(s.key)
	return m
}
