package main

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

// The operator's settings come, for every flag of every command, from (in
// this order) the command line, a PLANLOCK_<FLAG> environment variable, the
// operator's config file, and the flag's default. The config file is the
// operator's, never the plan author's: it is found in $XDG_CONFIG_HOME (or
// given with --config / PLANLOCK_CONFIG) and refused inside the plan's
// repository, since it holds the trust policy that decides which plans run.

const (
	envPrefix     = "PLANLOCK_"
	configFlag    = "config"
	configEnv     = "PLANLOCK_CONFIG"
	configDirName = "planlock"
	configName    = "config.hcl"
)

// settings applies environment variables and the config file to every
// command of an app. show, when set, makes every command print its
// effective settings instead of running (planlock config show).
type settings struct {
	known map[string]bool // config keys some command has
	show  *showRequest
}

type showRequest struct {
	args []string // the command line being shown, to tell a flag from env
}

// applySettings derives the environment variable of every flag (one that
// declares its own keeps it), adds --config to every command that runs, and
// wraps its action so that the config file fills the flags nothing else set.
// It works on whatever flags the commands define, so new flags need nothing.
func applySettings(cmds []*cli.Command, show *showRequest) {
	st := &settings{known: map[string]bool{}, show: show}
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			for _, f := range cmd.Flags {
				deriveEnv(f)
				if k := configKey(f); k != "" {
					st.known[k] = true
				}
				if show != nil {
					setField(f, "Required", false) // show what a command would get, even when incomplete
				}
			}
			if cmd.Action != nil && !cmd.SkipFlagParsing {
				if !hasFlag(cmd.Flags, configFlag) {
					cmd.Flags = append(cmd.Flags, &cli.StringFlag{Name: configFlag, EnvVars: []string{configEnv},
						Usage: "operator config `FILE` (default $XDG_CONFIG_HOME/planlock/config.hcl; never one inside the plans repository)", TakesFile: true})
				}
				cmd.Action = st.wrap(cmd.Action)
			}
			walk(cmd.Subcommands)
		}
	}
	walk(cmds)
}

func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// skipFlag: urfave's own flags take no settings.
func skipFlag(f cli.Flag) bool {
	n := f.Names()[0]
	return n == "help" || n == "version" || n == configFlag
}

// envName is the variable for a flag: --state-root is PLANLOCK_STATE_ROOT.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func deriveEnv(f cli.Flag) {
	if skipFlag(f) {
		return
	}
	if ev, ok := f.(interface{ GetEnvVars() []string }); ok && len(ev.GetEnvVars()) > 0 {
		return
	}
	setField(f, "EnvVars", []string{envName(f.Names()[0])})
}

// configKey is a flag's name in the config file: its environment variable
// without PLANLOCK_, in lower case (state_root, certificate_identity).
func configKey(f cli.Flag) string {
	if skipFlag(f) {
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
		cfg, err := loadOperatorConfig(c, st.known)
		if err != nil {
			return err
		}
		sources, err := cfg.apply(c)
		if err != nil {
			return err
		}
		if c.App.Metadata == nil {
			c.App.Metadata = map[string]any{}
		}
		c.App.Metadata[configSourcesKey] = sources
		if st.show != nil {
			return showSettings(c, cfg, sources, st.show.args)
		}
		if err := resolveTrust(c); err != nil { // trust_sources.go
			return err
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

// operatorConfig is the parsed config file; a zero one (path "") means none.
type operatorConfig struct {
	path     string
	explicit bool // named by --config or PLANLOCK_CONFIG
	values   map[string]configValue
}

// defaultConfigPath is $XDG_CONFIG_HOME/planlock/config.hcl, else
// ~/.config/planlock/config.hcl.
func defaultConfigPath() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, configDirName, configName), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the config file: %w", err)
	}
	return filepath.Join(home, ".config", configDirName, configName), nil
}

// loadOperatorConfig reads the config file a command uses. A missing default
// file is no config; a missing named one is an error. Every problem with the
// file is a usage error (exit 2) naming file:line:col, like a bad flag.
func loadOperatorConfig(c *cli.Context, known map[string]bool) (*operatorConfig, error) {
	cfg := &operatorConfig{values: map[string]configValue{}}
	path := c.String(configFlag)
	cfg.explicit = path != ""
	if path == "" {
		p, err := defaultConfigPath()
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
	if err := refuseConfigInPlanRepo(c, abs); err != nil {
		return nil, err
	}
	// Anyone who can write the file chooses whom the proxy trusts.
	if st, err := os.Stat(abs); err == nil && runtime.GOOS != "windows" && st.Mode().Perm()&0o002 != 0 {
		return nil, usageErrorf("config file %s is writable by every user (mode %04o): it holds the trust policy; chmod o-w it", abs, st.Mode().Perm())
	}
	cfg.path = abs
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

// refuseConfigInPlanRepo refuses a config file inside the plan's directory or
// the Git checkout holding it: whoever can change the plans could otherwise
// choose whom the proxy trusts.
func refuseConfigInPlanRepo(c *cli.Context, configPath string) error {
	if !hasFlag(c.Command.Flags, "plan") || c.String("plan") == "" {
		return nil
	}
	planDir, err := filepath.Abs(filepath.Dir(c.String("plan")))
	if err != nil {
		return nil
	}
	guard := planDir
	for d := planDir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			guard = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if within(configPath, guard) {
		return usageErrorf("config file %s is inside the plan's repository or directory %s: the operator's configuration (its trust policy) must not come from where plans are written; move it to %s", configPath, guard, "$XDG_CONFIG_HOME/planlock/config.hcl")
	}
	return nil
}

func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// configSourcesKey keeps, in the app's metadata, the flags the config file set.
const configSourcesKey = "planlock.configSources"

// fromConfig reports whether the config file set the flag.
func fromConfig(c *cli.Context, name string) bool {
	m, _ := c.App.Metadata[configSourcesKey].(map[string]source)
	_, ok := m[name]
	return ok
}

// source says where a flag's value came from.
type source struct {
	kind  string // "flag", "env", "config", "default"
	where string
}

// apply sets, for each flag of the command that neither the command line
// nor the environment set, the config file's value. Relative file names are
// relative to the config file, and ~/ is the home directory.
func (cfg *operatorConfig) apply(c *cli.Context) (map[string]source, error) {
	sources := map[string]source{}
	for _, f := range c.Command.Flags {
		if skipFlag(f) {
			continue
		}
		name := f.Names()[0]
		if c.IsSet(name) {
			continue
		}
		key := configKey(f)
		v, ok := cfg.values[key]
		if !ok {
			continue
		}
		_, slice := f.(*cli.StringSliceFlag)
		if v.list && !slice {
			return nil, usageErrorf("%s: %s takes one value, not a list", pos(v.rng), key)
		}
		for _, s := range v.values {
			if takesFile(f) {
				s = configPath(cfg.path, s)
			}
			if err := c.Set(name, s); err != nil {
				return nil, usageErrorf("%s: %s = %q: %s", pos(v.rng), key, s, valueHint(f, err))
			}
		}
		sources[name] = source{kind: "config", where: pos(v.rng)}
	}
	return sources, nil
}

// takesFile reads the TakesFile field some flag types have.
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

func takesFile(f cli.Flag) bool {
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
