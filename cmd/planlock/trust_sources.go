package main

import (
	"fmt"
	"os"
	"reflect"

	"github.com/urfave/cli/v2"

	"github.com/planlock/planlock/internal/settings"
)

// Trust settings come from three places, like every flag: the command line,
// PLANLOCK_* variables and the operator config file. The config file (say
// `key = "plans.pub"`) is a default: it must never turn a documented command
// into an error. So when two kinds of trust contradict each other (a key and
// a certificate identity; --insecure-skip-verify and anything that verifies),
// the one from the nearer source wins and the other is dropped before the
// command runs: the command line beats the environment, which beats the
// config file. Only a contradiction within one source is an error; on the
// command line each command words it itself (it knows "plan" from "plans").

const (
	argsKey    = "planlock.args"    // app metadata: the command line as run
	droppedKey = "planlock.dropped" // app metadata: flags a nearer source overrode
)

// origin ranks where a flag's value came from; a higher one wins.
type origin int

const (
	originNone origin = iota
	originConfig
	originEnv
	originFlag
)

// keylessFlags are the trust flags of a certificate identity policy.
var keylessFlags = []string{
	"certificate-identity", "certificate-identity-regexp",
	"certificate-oidc-issuer", "certificate-oidc-issuer-regexp",
	"certificate-github-workflow-repository", "certificate-github-workflow-ref",
	"certificate-github-workflow-trigger", "certificate-github-workflow-sha",
	"certificate-github-workflow-name",
}

// verifyingFlags are what --insecure-skip-verify contradicts.
var verifyingFlags = append([]string{"key", "bundle", "path"}, keylessFlags...)

// auxiliaryFlags say where to verify against, not whom to trust: set
// anywhere but on the command line they are simply unused by an unverified
// run, never a contradiction.
var auxiliaryFlags = []string{"trusted-root", "tuf-cache"}

type trustResolver struct {
	c     *cli.Context
	flags map[string]cli.Flag
}

// resolveTrust drops, from the command's flags, trust settings that a
// nearer source contradicts; see above.
func resolveTrust(c *cli.Context) error {
	r := &trustResolver{c: c, flags: map[string]cli.Flag{}}
	for _, f := range c.Command.Flags {
		r.flags[f.Names()[0]] = f
	}
	// An empty value (PLANLOCK_KEY=) sets nothing: it neither contradicts
	// another setting nor counts as a trust policy.
	for _, n := range append(verifyingFlags, auxiliaryFlags...) {
		if v, ok := destination(r.flags[n]).(*string); ok && *v == "" && c.IsSet(n) {
			r.markDropped(n)
		}
	}
	// Commands with a signing --key (sign, holds approve) have no
	// certificate flags: their --key is not a trust policy.
	if r.has("key") && r.has("certificate-identity") {
		if err := r.oneOf([]string{"key"}, keylessFlags, "a key and a certificate identity are two different trust policies"); err != nil {
			return err
		}
	}
	if r.has("insecure-skip-verify") && r.on("insecure-skip-verify") {
		if err := r.oneOf([]string{"insecure-skip-verify"}, verifyingFlags, "--insecure-skip-verify does not verify, so the other would be ignored"); err != nil {
			return err
		}
		if r.on("insecure-skip-verify") {
			r.drop(auxiliaryFlags, originFlag) // typed ones are the command's to refuse
		}
	}
	return nil
}

func (r *trustResolver) has(name string) bool { _, ok := r.flags[name]; return ok }

// on reports whether a bool flag is set to true.
func (r *trustResolver) on(name string) bool {
	b, ok := destination(r.flags[name]).(*bool)
	return ok && *b
}

// origin is where the flag's value came from, originNone when unset or dropped.
func (r *trustResolver) origin(name string) origin {
	f, ok := r.flags[name]
	if !ok || dropped(r.c, name) || !r.c.IsSet(name) {
		return originNone
	}
	if fromConfig(r.c, name) {
		return originConfig
	}
	args, ok := r.c.App.Metadata[argsKey].([]string)
	if !ok || flagGiven(args, f.Names()) {
		return originFlag
	}
	return originEnv
}

// top is the nearest origin among names, and the first flag from it.
func (r *trustResolver) top(names []string) (origin, string) {
	best, which := originNone, ""
	for _, n := range names {
		if o := r.origin(n); o > best {
			best, which = o, n
		}
	}
	return best, which
}

// oneOf keeps group a or group b, whichever comes from the nearer source,
// and drops the other's flags from farther sources. Both from the command
// line is left to the command; both from the environment or both from the
// config file is an error naming the two.
func (r *trustResolver) oneOf(a, b []string, why string) error {
	oa, na := r.top(a)
	ob, nb := r.top(b)
	if oa == originNone || ob == originNone {
		return nil
	}
	switch {
	case oa > ob:
		r.drop(b, oa)
	case ob > oa:
		r.drop(a, ob)
	default:
		// Farther members of either group go; the contradiction is
		// then between flags of the same source.
		r.drop(a, oa)
		r.drop(b, ob)
		if oa != originFlag {
			return usageErrorf("%s and %s are both set: %s; remove one", r.describe(na, oa), r.describe(nb, ob), why)
		}
	}
	return nil
}

// drop clears the flags of names from sources farther than winner.
func (r *trustResolver) drop(names []string, winner origin) {
	for _, n := range names {
		if o := r.origin(n); o != originNone && o < winner {
			clearFlag(r.flags[n])
			r.markDropped(n)
		}
	}
}

func (r *trustResolver) markDropped(name string) {
	m, _ := r.c.App.Metadata[droppedKey].(map[string]bool)
	if m == nil {
		m = map[string]bool{}
		r.c.App.Metadata[droppedKey] = m
	}
	m[name] = true
}

// describe names a setting as its source spells it.
func (r *trustResolver) describe(name string, o origin) string {
	f := r.flags[name]
	switch o {
	case originEnv:
		if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
			for _, e := range ev.GetEnvVars() {
				if _, set := os.LookupEnv(e); set {
					return e
				}
			}
		}
	case originConfig:
		m, _ := r.c.App.Metadata[settings.SourcesKey].(map[string]settings.Source)
		return fmt.Sprintf("%s (config file %s)", configKey(f), m[name].Where)
	}
	return "--" + name
}

// dropped reports whether a nearer source overrode the flag.
func dropped(c *cli.Context, name string) bool {
	if c == nil || c.App == nil {
		return false
	}
	m, _ := c.App.Metadata[droppedKey].(map[string]bool)
	return m[name]
}

// destination is the pointer a flag writes its value through.
func destination(f cli.Flag) any {
	rv := reflect.ValueOf(f)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil
	}
	fv := rv.Elem().FieldByName("Destination")
	if !fv.IsValid() || fv.Kind() != reflect.Pointer || fv.IsNil() {
		return nil
	}
	return fv.Interface()
}

// clearFlag zeroes the field a flag writes to.
func clearFlag(f cli.Flag) {
	if d := destination(f); d != nil {
		v := reflect.ValueOf(d).Elem()
		v.Set(reflect.Zero(v.Type()))
	}
}
