package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
	"github.com/urfave/cli/v2"
)

// fileStateOptions are the flags of a state directory's journal, the
// same for proxy and serve (each plan's journal): its rotation and the
// start without its anchor. A postgres:// state, whose database holds the
// audit chain, takes none of them.
type fileStateOptions struct {
	AcceptMissingAnchor bool
	auditRotateOptions
}

// fileStateFlags are the names of fileStateOptions' flags.
var fileStateFlags = []string{"accept-missing-anchor", "audit-rotate-size", "audit-rotate-every"}

func (f *fileStateOptions) flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "accept-missing-anchor", Usage: "start although the audit log's anchor (<state>/head) is missing, writing a new one at the log's end; for one start after an upgrade or a restored backup, once the log was checked against a head kept elsewhere", Destination: &f.AcceptMissingAnchor},
	}, f.auditRotateOptions.flags()...)
}

// apply sets the journal's options; a postgres:// state (pg) refuses
// them when given.
func (f *fileStateOptions) apply(o *ledger.Options, pg bool, given func(string) bool) error {
	if pg {
		for _, name := range fileStateFlags {
			if given(name) {
				return usageErrorf("--%s applies to a state directory, not to --state postgres://...: the database holds the audit chain", name)
			}
		}
	}
	o.AcceptMissingAnchor = f.AcceptMissingAnchor
	return f.auditRotateOptions.apply(o)
}

// auditRotateOptions are the audit log rotation flags.
type auditRotateOptions struct {
	AuditRotateSize  string
	AuditRotateEvery time.Duration
}

// Bounds keep a typo from rotating at every record.
const (
	minRotateSize  = 64 << 10
	minRotateEvery = time.Minute
)

func (r *auditRotateOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "audit-rotate-size", Destination: &r.AuditRotateSize,
			Usage: "move the audit log aside as an archived segment once it holds `SIZE` (e.g. 64MiB, 1GB; at least 64KiB; default: never); the chain continues in the new file"},
		&cli.DurationFlag{Name: "audit-rotate-every", Destination: &r.AuditRotateEvery,
			Usage: "move the audit log aside once its first record is `DURATION` old (e.g. 24h; at least 1m; default: never)"},
	}
}

// apply sets the ledger's rotation options.
func (r *auditRotateOptions) apply(o *ledger.Options) error {
	if r.AuditRotateSize != "" {
		n, err := parseByteSize(r.AuditRotateSize)
		if err != nil {
			return usageErrorf("--audit-rotate-size: %v", err)
		}
		if n < minRotateSize {
			return usageErrorf("--audit-rotate-size %s: at least 64KiB", r.AuditRotateSize)
		}
		o.RotateSize = n
	}
	if r.AuditRotateEvery != 0 && r.AuditRotateEvery < minRotateEvery {
		return usageErrorf("--audit-rotate-every %s: at least 1m", r.AuditRotateEvery)
	}
	o.RotateEvery = r.AuditRotateEvery
	return nil
}

// parseByteSize reads 65536, 64KiB, 64MiB, 1GiB, 500KB, 64MB, 1GB (the
// binary units are powers of 1024, the decimal ones of 1000).
func parseByteSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (a whole number of bytes, or with KiB, MiB, GiB, KB, MB, GB)", s)
	}
	return n * mult, nil
}
