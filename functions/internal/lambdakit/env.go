package lambdakit

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Env reads typed settings through a getenv function (os.Getenv in main, a
// map in tests) and collects every problem, so a misconfigured function
// reports all of them at once. Read each setting, then call Err.
type Env struct {
	getenv func(string) string
	errs   []error
}

// NewEnv returns an Env reading through getenv.
func NewEnv(getenv func(string) string) *Env { return &Env{getenv: getenv} }

func (e *Env) lookup(name string) string { return strings.TrimSpace(e.getenv(name)) }

func (e *Env) fail(name, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

// String returns the value of the required setting name; an empty or
// unset value is an error.
func (e *Env) String(name string) string {
	v := e.lookup(name)
	if v == "" {
		e.fail(name, "required")
	}
	return v
}

// StringOr returns the value of name, or def when it is empty or unset.
func (e *Env) StringOr(name, def string) string {
	if v := e.lookup(name); v != "" {
		return v
	}
	return def
}

// Int returns name as a decimal integer in [lo, hi], or def when unset; a
// malformed or out-of-range value is an error.
func (e *Env) Int(name string, def, lo, hi int) int {
	v := e.lookup(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		e.fail(name, "%q is not an integer", v)
		return def
	case n < lo || n > hi:
		e.fail(name, "%d is outside [%d, %d]", n, lo, hi)
		return def
	}
	return n
}

// Float returns name as a number in [lo, hi], or def when unset.
func (e *Env) Float(name string, def, lo, hi float64) float64 {
	v := e.lookup(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil:
		e.fail(name, "%q is not a number", v)
		return def
	case f < lo || f > hi:
		e.fail(name, "%v is outside [%v, %v]", f, lo, hi)
		return def
	}
	return f
}

// Bool returns name as a boolean ("true", "false", "1", "0"; any case), or
// def when unset.
func (e *Env) Bool(name string, def bool) bool {
	v := e.lookup(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, "%q is not true or false", v)
		return def
	}
	return b
}

// Duration returns name as a Go duration ("90s", "5m") of at least min, or
// def when unset.
func (e *Env) Duration(name string, def, min time.Duration) time.Duration {
	v := e.lookup(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		e.fail(name, "%q is not a duration such as 90s or 5m", v)
		return def
	case d < min:
		e.fail(name, "%v is below the minimum %v", d, min)
		return def
	}
	return d
}

// Level returns name as a log level (DEBUG, INFO, WARN, ERROR), INFO when
// unset.
func (e *Env) Level(name string) slog.Level {
	v := e.lookup(name)
	l, err := ParseLevel(v)
	if err != nil {
		e.fail(name, "%q is not a log level (DEBUG, INFO, WARN or ERROR)", v)
		return slog.LevelInfo
	}
	return l
}

// Err returns every problem found so far, joined, or nil.
func (e *Env) Err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return fmt.Errorf("configuration: %w", errors.Join(e.errs...))
}
