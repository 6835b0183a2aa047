// Package settings gives every flag of a urfave/cli command tree its
// settings from, in this order, the command line, an environment variable
// (PREFIX + the flag's name: --state-root is PLANLOCK_STATE_ROOT) and an
// operator config file of flat HCL attributes (state_root = "..."), then
// the flag's default. It works on whatever flags the commands declare, so
// a new flag needs nothing: its variable, its config key and its place in
// a settings listing come with it.
package settings

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/planlock/planlock/internal/boundedio"
	"github.com/planlock/planlock/internal/editdist"
	"github.com/urfave/cli/v2"
	"github.com/zclconf/go-cty/cty"
)

const (
	envPrefix = "PLANLOCK_"
	// ConfigFlag names the config file; ConfigEnv is its variable.
	ConfigFlag    = "config"
	ConfigEnv     = "PLANLOCK_CONFIG"
	configDirName = "planlock"
	configName    = "config.hcl"
)

// Options are what Apply needs of the program.
type Options struct {
	// Usage makes a usage error (exit 2) of the program's.
	Usage func(format string, a ...any) error
	// Guard, when set, refuses a config file for the command (planlock:
	// one inside the plan's repository).
	Guard func(c *cli.Context, configPath string) error
	// Show, when set, runs instead of every command: it prints the
	// effective settings (planlock config show); Required flags are then
	// not required.
	Show func(c *cli.Context, cfg *Config, sources map[string]Source) error
	// Before, when set, runs after the settings are applied and before
	// the command (planlock: which trust flags win).
	Before func(c *cli.Context) error
}

// settings applies environment variables and the config file to every
// command of an app.
type settings struct {
	known map[string]bool // config keys some command has
	o     Options
}

// Apply derives the environment variable of every flag (one that
// declares its own keeps it), adds --config to every command that runs, and
// wraps its action so that the config file fills the flags nothing else set.
// It works on whatever flags the commands define, so new flags need nothing.
func Apply(cmds []*cli.Command, o Options) {
	show := o.Show
	st := &settings{known: map[string]bool{}, o: o}
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			for _, f := range cmd.Flags {
				deriveEnv(f)
				if k := ConfigKey(f); k != "" {
					st.known[k] = true
				}
				if show != nil {
					setField(f, "Required", false) // show what a command would get, even when incomplete
				}
			}
			if cmd.Action != nil && !cmd.SkipFlagParsing {
				if !HasFlag(cmd.Flags, ConfigFlag) {
					cmd.Flags = append(cmd.Flags, &cli.StringFlag{Name: ConfigFlag, EnvVars: []string{ConfigEnv},
						Usage: "operator config `FILE` (default $XDG_CONFIG_HOME/planlock/config.hcl; never one inside the plans repository)", TakesFile: true})
				}
				cmd.Action = st.wrap(cmd.Action)
			}
			walk(cmd.Subcommands)
		}
	}
	walk(cmds)
}

// HasFlag reports whether flags has one named name.
func HasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// SkipFlag: urfave's own flags take no settings.
func SkipFlag(f cli.Flag) bool {
	n := f.Names()[0]
	return n == "help" || n == "version" || n == ConfigFlag
}

// envName is the variable for a flag: --state-root is PLANLOCK_STATE_ROOT.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func deriveEnv(f cli.Flag) {
	if SkipFlag(f) {
		return
	}
	if ev, ok := f.(interface{ GetEnvVars() []string }); ok && len(ev.GetEnvVars()) > 0 {
		return
	}
	setField(f, "EnvVars", []string{envName(f.Names()[0])})
}

// ConfigKey is a flag's name in the config file: its environment variable
// without PLANLOCK_, in lower case (state_root, certificate_identity).
func ConfigKey(f cli.Flag) string {
	if SkipFlag(f) {
		return ""
	}
	if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
		for _, e := range ev.GetEnvVars() {
			if strings.HasPrefix(e, envPrefix) {
				return strings.ToLower(strings.TrimPrefix(e, envPrefix))
			}
		}
	}
	return strings.ReplaceAll(f.Names()[0], "-", "_")
}

// setField sets an exported field of a flag struct (every urfave flag type
// has EnvVars and Required); flags without it are left alone.
func setField(f cli.Flag, name string, v any) {
	rv := reflect.ValueOf(f)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return
	}
	fv := rv.Elem().FieldByName(name)
	if fv.IsValid() && fv.CanSet() && fv.Type() == reflect.TypeOf(v) {
		fv.Set(reflect.ValueOf(v))
	}
}

func (st *settings) wrap(next cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		cfg, err := st.load(c)
		if err != nil {
			return err
		}
		sources, err := cfg.apply(c, st.o.Usage)
		if err != nil {
			return err
		}
		if c.App.Metadata == nil {
			c.App.Metadata = map[string]any{}
		}
		c.App.Metadata[SourcesKey] = sources
		if st.o.Show != nil {
			return st.o.Show(c, cfg, sources)
		}
		if st.o.Before != nil {
			if err := st.o.Before(c); err != nil {
				return err
			}
		}
		return next(c)
	}
}

// configValue is one attribute of the config file.
type configValue struct {
	values []string
	list   bool
	rng    hcl.Range
}

// Config is the parsed config file; a zero one (Path "") means none.
type Config struct {
	Path     string
	explicit bool // named by --config or PLANLOCK_CONFIG
	values   map[string]configValue
}

// DefaultPath is $XDG_CONFIG_HOME/planlock/config.hcl, else
// ~/.config/planlock/config.hcl.
func DefaultPath() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, configDirName, configName), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the config file: %w", err)
	}
	return filepath.Join(home, ".config", configDirName, configName), nil
}

// load reads the config file a command uses. A missing default
// file is no config; a missing named one is an error. Every problem with the
// file is a usage error (exit 2) naming file:line:col, like a bad flag.
func (st *settings) load(c *cli.Context) (*Config, error) {
	usageErrorf, known := st.o.Usage, st.known
	cfg := &Config{values: map[string]configValue{}}
	path := c.String(ConfigFlag)
	cfg.explicit = path != ""
	if path == "" {
		p, err := DefaultPath()
		if err != nil {
			return cfg, nil // no home directory: no default config
		}
		path = p
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, usageErrorf("config file %s: %v", path, err)
	}
	src, err := boundedio.ReadFile(abs, boundedio.MaxConfigBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !cfg.explicit {
			return cfg, nil
		}
		return nil, usageErrorf("config file: %v", err)
	}
	if st.o.Guard != nil {
		if err := st.o.Guard(c, abs); err != nil {
			return nil, err
		}
	}
	// Anyone who can write the file chooses whom the proxy trusts.
	if st, err := os.Stat(abs); err == nil && runtime.GOOS != "windows" && st.Mode().Perm()&0o002 != 0 {
		return nil, usageErrorf("config file %s is writable by every user (mode %04o): it holds the trust policy; chmod o-w it", abs, st.Mode().Perm())
	}
	cfg.Path = abs
	values, err := parseOperatorConfig(abs, src, known)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	cfg.values = values
	return cfg, nil
}

// parseOperatorConfig reads flat attributes: literal strings, numbers, bools
// and lists of strings; no blocks, variables or functions.
func parseOperatorConfig(path string, src []byte, known map[string]bool) (map[string]configValue, error) {
	file, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, oneDiag(diags)
	}
	attrs, diags := file.Body.JustAttributes()
	if diags.HasErrors() {
		return nil, oneDiag(diags)
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return attrs[names[i]].Range.Start.Byte < attrs[names[j]].Range.Start.Byte })
	out := map[string]configValue{}
	for _, n := range names {
		a := attrs[n]
		if !known[n] {
			return nil, fmt.Errorf("%s: unknown setting %q%s", pos(a.NameRange), n, nearest(n, known))
		}
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return nil, oneDiag(diags)
		}
		cv := configValue{rng: a.Range}
		switch {
		case v.IsNull() || !v.IsWhollyKnown():
			return nil, fmt.Errorf("%s: %s: a value is required", pos(a.Expr.Range()), n)
		case v.Type() == cty.String:
			cv.values = []string{v.AsString()}
		case v.Type() == cty.Bool:
			cv.values = []string{fmt.Sprint(v.True())}
		case v.Type() == cty.Number:
			cv.values = []string{v.AsBigFloat().Text('f', -1)}
		case v.Type().IsTupleType() || v.Type().IsListType():
			cv.list = true
			for it := v.ElementIterator(); it.Next(); {
				_, e := it.Element()
				if e.IsNull() || e.Type() != cty.String {
					return nil, fmt.Errorf("%s: %s: a list may hold strings only", pos(a.Expr.Range()), n)
				}
				cv.values = append(cv.values, e.AsString())
			}
		default:
			return nil, fmt.Errorf("%s: %s: want a string, number, bool or list of strings", pos(a.Expr.Range()), n)
		}
		out[n] = cv
	}
	return out, nil
}

func pos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// oneDiag is the first error of diags on one line: file:line:col: summary; detail.
func oneDiag(diags hcl.Diagnostics) error {
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += "; " + d.Detail
		}
		msg = strings.Join(strings.Fields(msg), " ")
		if d.Subject != nil {
			return fmt.Errorf("%s: %s", pos(*d.Subject), msg)
		}
		return errors.New(msg)
	}
	return errors.New(diags.Error())
}

// nearest suggests a known key for a misspelt one.
func nearest(n string, known map[string]bool) string {
	best, bestD := "", 3
	for k := range known {
		if d := editdist.Distance(n, k); d < bestD || (d == bestD && best != "" && k < best) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// SourcesKey keeps, in the app's metadata, the flags the config file set
// (a map[string]Source).
const SourcesKey = "planlock.configSources"

// FromConfig reports whether the config file set the flag.
func FromConfig(c *cli.Context, name string) bool {
	m, _ := c.App.Metadata[SourcesKey].(map[string]Source)
	_, ok := m[name]
	return ok
}

// Source says where a flag's value came from.
type Source struct {
	Kind  string // "flag", "env", "config", "default"
	Where string
}

// apply sets, for each flag of the command that neither the command line
// nor the environment set, the config file's value. Relative file names are
// relative to the config file, and ~/ is the home directory.
func (cfg *Config) apply(c *cli.Context, usageErrorf func(string, ...any) error) (map[string]Source, error) {
	sources := map[string]Source{}
	for _, f := range c.Command.Flags {
		if SkipFlag(f) {
			continue
		}
		name := f.Names()[0]
		if c.IsSet(name) {
			continue
		}
		key := ConfigKey(f)
		v, ok := cfg.values[key]
		if !ok {
			continue
		}
		_, slice := f.(*cli.StringSliceFlag)
		if v.list && !slice {
			return nil, usageErrorf("%s: %s takes one value, not a list", pos(v.rng), key)
		}
		for _, s := range v.values {
			if TakesFile(f) {
				s = configPath(cfg.Path, s)
			}
			if err := c.Set(name, s); err != nil {
				return nil, usageErrorf("%s: %s = %q: %s", pos(v.rng), key, s, valueHint(f, err))
			}
		}
		sources[name] = Source{Kind: "config", Where: pos(v.rng)}
	}
	return sources, nil
}

// valueHint says what a flag wants, since the flag package says only "parse error".
func valueHint(f cli.Flag, err error) string {
	switch f.(type) {
	case *cli.DurationFlag:
		return "want a duration such as 30s or 2m"
	case *cli.BoolFlag:
		return "want true or false"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return "want a whole number"
	}
	return err.Error()
}

// TakesFile reads the TakesFile field some flag types have.
func TakesFile(f cli.Flag) bool {
	rv := reflect.ValueOf(f)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return false
	}
	fv := rv.Elem().FieldByName("TakesFile")
	return fv.IsValid() && fv.Kind() == reflect.Bool && fv.Bool()
}

// configPath resolves a file name written in the config file.
func configPath(configFile, s string) string {
	switch {
	case s == "" || strings.Contains(s, "://"):
		return s
	case s == "~" || strings.HasPrefix(s, "~/"):
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, s[1:])
		}
		return s
	case filepath.IsAbs(s):
		return s
	}
	return filepath.Join(filepath.Dir(configFile), s)
}
