package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
	"github.com/urfave/cli/v2"
)

// auditRotateOptions are the proxy's audit log rotation flags.
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
