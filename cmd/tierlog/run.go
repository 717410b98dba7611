package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// defaultProgressBytes is how many bytes a scan reads between two progress
// lines on stderr: a 1 GiB segment prints about 16.
const defaultProgressBytes = 64 << 20

// run is the whole program: it parses args, runs one command and returns
// the exit status (see the package comment).
func run(args []string, stdout, stderr io.Writer) int {
	t := &tool{fs: vfs.Default, stdout: stdout, stderr: stderr, progressBytes: defaultProgressBytes}
	return t.main(args)
}

// tool holds what every command needs. Tests build one on a memory FS.
type tool struct {
	fs     vfs.FS
	stdout io.Writer
	stderr io.Writer
	// progressBytes is how many bytes a long scan reads between progress
	// lines on stderr; 0 prints none.
	progressBytes int64
}

// command is one subcommand. setup declares its flags; exec runs it on the
// positional arguments (already counted against nargs).
type command struct {
	name    string
	usage   string // arguments, for the usage line
	summary string
	nargs   int
	setup   func(fl *flag.FlagSet) func(t *tool, args []string, out *output) error
}

var commands []command

func init() {
	commands = []command{
		{"dump-log", "[--deep] [--print-values] [--max-value-bytes N] <file.log>",
			"the batches of a segment, CRC checked; --deep decodes the records", 1, setupDumpLog},
		{"dump-index", "[--no-verify] <file.index|file.timeindex>",
			"the entries of an offset or time index, checked against the .log beside it", 1, setupDumpIndex},
		{"epochs", "<partition dir|leader-epoch-checkpoint>",
			"the leader-epoch checkpoint", 1, setupEpochs},
		{"snapshot", "<file.snapshot>",
			"the producers of a producer-state snapshot", 1, setupSnapshot},
		{"checkpoint", "<partition dir|offsets-checkpoint>",
			"the log start offset and recovery point", 1, setupCheckpoint},
		{"describe", "<partition dir>",
			"offsets, segments, epochs and markers of a partition directory (the log is not opened)", 1, setupDescribe},
		{"remote-segments", "[--topic-id ID] [--partition N] <metadata dir>",
			"remote segment metadata from the Pebble store (opened read-only)", 1, setupRemoteSegments},
		{"describe-replica", "--metadata DIR --topic-id ID --partition N --seal S --cross-tier-start X [--high-watermark H] [--seal-lineage E@S,...] <partition dir>",
			"what DescribeDisklessSwitchReplica would answer for this replica", 1, setupDescribeReplica},
		{"wal-partition", "--topic-id ID --partition N <control-plane dir>",
			"a partition's row and producer states in the WAL control plane (opened read-only)", 1, setupWALPartition},
	}
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errProblems is returned by a command that printed its findings and found
// damage: the problems were already printed, one a line.
var errProblems = errors.New("problems found")

func (t *tool) printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: tierlog <command> [flags] <path>")
	fmt.Fprintln(w, "Inspects tierlog files without changing them. Every command takes --json.")
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-17s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "Run 'tierlog <command> --help' for its flags.")
}

func (t *tool) main(args []string) int {
	if len(args) == 0 {
		t.printUsage(t.stderr)
		return 2
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" {
		t.printUsage(t.stdout)
		return 0
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == name {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(t.stderr, "tierlog: unknown command %q\n", name)
		t.printUsage(t.stderr)
		return 2
	}
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	fl.SetOutput(t.stderr)
	jsonOut := fl.Bool("json", false, "print one JSON document instead of text")
	exec := cmd.setup(fl)
	fl.Usage = func() {
		fmt.Fprintf(t.stderr, "usage: tierlog %s %s\n%s.\nFlags:\n", cmd.name, cmd.usage, cmd.summary)
		fl.PrintDefaults()
	}
	pos, err := parseInterspersed(fl, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // the flag package printed the error and the usage
	}
	if len(pos) != cmd.nargs {
		fmt.Fprintf(t.stderr, "tierlog %s: want %d argument(s), got %d (usage: tierlog %s %s)\n",
			name, cmd.nargs, len(pos), name, cmd.usage)
		return 2
	}
	out := &output{json: *jsonOut, w: t.stdout}
	err = exec(t, pos, out)
	if ferr := out.flush(); err == nil {
		err = ferr
	}
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(t.stderr, "tierlog %s: %s (see tierlog %s --help)\n", name, ue.msg, name)
		return 2
	case errors.Is(err, errProblems):
		fmt.Fprintf(t.stderr, "tierlog %s: %v\n", name, err)
		return 1
	default:
		fmt.Fprintf(t.stderr, "tierlog %s: %s\n", name, oneLine(err))
		return 1
	}
}

// parseInterspersed parses flags anywhere among the arguments (the flag
// package stops at the first non-flag) and returns the positional ones.
// "--" ends the flags.
func parseInterspersed(fl *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fl.Parse(args); err != nil {
			return nil, err
		}
		args = fl.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// oneLine keeps an error message on one line (Pebble's errors may hold
// newlines).
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// output collects a command's result: text lines as they come, or the
// JSON document, written once at the end.
type output struct {
	json bool
	w    io.Writer
	doc  any
	err  error
}

// printf writes a line of text output; ignored in JSON mode.
func (o *output) printf(format string, args ...any) {
	if o.json || o.err != nil {
		return
	}
	_, o.err = fmt.Fprintf(o.w, format+"\n", args...)
}

// setJSON sets the JSON document (ignored in text mode).
func (o *output) setJSON(doc any) { o.doc = doc }

func (o *output) flush() error {
	if o.err != nil || !o.json || o.doc == nil {
		return o.err
	}
	enc := json.NewEncoder(o.w)
	enc.SetIndent("", "  ")
	return enc.Encode(o.doc)
}

// problems collects the damage a command finds; each is printed (text) or
// listed (JSON) where it is found, and the command then fails with
// errProblems so the exit status is 1.
type problems struct {
	list []string
}

func (p *problems) addf(format string, args ...any) string {
	msg := fmt.Sprintf(format, args...)
	p.list = append(p.list, msg)
	return msg
}

// err returns nil or an error wrapping errProblems that names the first
// problem, so the last line on stderr says what went wrong.
func (p *problems) err() error {
	switch len(p.list) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%w: %s", errProblems, p.list[0])
	default:
		return fmt.Errorf("%w: %s (and %d more)", errProblems, p.list[0], len(p.list)-1)
	}
}
