package ckptcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/caravan-nomad/caravan/driver/store"
	"github.com/caravan-nomad/caravan/internal/bytesize"
)

// keyRow is one line of `list`.
type keyRow struct {
	Key         string    `json:"key"`
	Generations []uint64  `json:"generations"`
	Step        string    `json:"step,omitempty"`
	Sequence    string    `json:"sequence,omitempty"`
	Bytes       int64     `json:"bytes"`
	Created     time.Time `json:"created"`
	Node        string    `json:"node"`
}

func list(s *store.Store, args []string, w io.Writer, asJSON bool) error {
	if len(args) != 0 {
		return fmt.Errorf("%w: list takes no arguments, got %q", errUsage, args)
	}
	keys, err := s.Keys()
	if err != nil {
		return err
	}
	rows := []keyRow{}
	for _, k := range keys {
		ms, err := s.List(k)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			continue // deleted or every manifest unreadable since Keys
		}
		newest := ms[len(ms)-1]
		r := keyRow{Key: k.String(), Step: newest.Meta[store.MetaStep], Sequence: newest.Meta[store.MetaSequence],
			Bytes: newest.TotalBytes, Created: newest.Created, Node: newest.Node}
		for _, m := range ms {
			r.Generations = append(r.Generations, m.Generation)
		}
		rows = append(rows, r)
	}
	if asJSON {
		return writeJSON(w, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tGENERATIONS\tNEWEST STEP\tSIZE\tCREATED\tNODE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Key, gensText(r.Generations), dash(printable(r.Step)),
			bytesize.Human(r.Bytes), r.Created.Format(time.RFC3339), printable(r.Node))
	}
	return tw.Flush()
}

func show(s *store.Store, args []string, w io.Writer, asJSON bool) error {
	key, err := oneKey(args)
	if err != nil {
		return err
	}
	ms, err := s.List(key)
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		return fmt.Errorf("%w for %s (see caravan checkpoint list)", store.ErrNoCheckpoint, key)
	}
	if asJSON {
		type gen struct {
			Generation uint64            `json:"generation"`
			Created    time.Time         `json:"created"`
			Node       string            `json:"node"`
			Bytes      int64             `json:"bytes"`
			Files      int               `json:"files"`
			Meta       map[string]string `json:"meta"`
		}
		out := struct {
			Key         string `json:"key"`
			Generations []gen  `json:"generations"`
		}{Key: key.String()}
		for _, m := range ms {
			out.Generations = append(out.Generations, gen{m.Generation, m.Created, m.Node, m.TotalBytes, len(m.Files), m.Meta})
		}
		return writeJSON(w, out)
	}
	fmt.Fprintf(w, "key %s\n\n", key)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GENERATION\tCREATED\tNODE\tSTEP\tSEQUENCE\tSIZE\tFILES\tMETA")
	for _, m := range ms {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", m.Generation, m.Created.Format(time.RFC3339), printable(m.Node),
			dash(printable(m.Meta[store.MetaStep])), dash(printable(m.Meta[store.MetaSequence])), bytesize.Human(m.TotalBytes), len(m.Files),
			metaText(m.Meta))
	}
	return tw.Flush()
}

func del(s *store.Store, args []string, w io.Writer, gc bool) error {
	key, err := oneKey(args)
	if err != nil {
		return err
	}
	n, err := s.Delete(key)
	switch {
	case errors.Is(err, store.ErrBusy):
		return fmt.Errorf("%w; nothing deleted, try again when it is done", err)
	case errors.Is(err, store.ErrNoCheckpoint):
		return fmt.Errorf("%w; nothing deleted (see caravan checkpoint list)", err)
	case err != nil:
		return err
	}
	fmt.Fprintf(w, "deleted %s: %d generation(s)\n", key, n)
	return freeChunks(s, w, gc)
}

// freeChunks runs a garbage collection now (gc), or says when one will.
func freeChunks(s *store.Store, w io.Writer, gc bool) error {
	if !gc {
		fmt.Fprintln(w, "its chunks are freed by the next garbage collection (-gc to run one now)")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), gcTimeout)
	defer cancel()
	if err := s.Sweep(ctx); err != nil {
		return fmt.Errorf("garbage collection: %w", err)
	}
	fmt.Fprintln(w, "unreferenced chunks freed")
	return nil
}

// delGeneration deletes one generation of a key.
func delGeneration(s *store.Store, args []string, w io.Writer, gen uint64, gc bool) error {
	key, err := oneKey(args)
	if err != nil {
		return err
	}
	err = s.DeleteGeneration(key, gen)
	switch {
	case errors.Is(err, store.ErrBusy):
		return fmt.Errorf("%w; nothing deleted, try again when it is done", err)
	case errors.Is(err, store.ErrNoCheckpoint):
		return fmt.Errorf("-generation: %w; nothing deleted (see caravan checkpoint show %s)", err, key)
	case err != nil:
		return err
	}
	fmt.Fprintf(w, "deleted %s generation %d\n", key, gen)
	if ms, err := s.List(key); err == nil && len(ms) > 0 {
		m := ms[len(ms)-1]
		fmt.Fprintf(w, "newest is now generation %d (step %s, sequence %s)\n", m.Generation,
			dash(printable(m.Meta[store.MetaStep])), dash(printable(m.Meta[store.MetaSequence])))
	} else {
		fmt.Fprintf(w, "it was the key's last generation: the key is gone\n")
	}
	return freeChunks(s, w, gc)
}

// gensText renders generations compactly: "3 (5..7)" or "1 (4)".
func gensText(g []uint64) string {
	if len(g) == 1 {
		return fmt.Sprintf("1 (%d)", g[0])
	}
	return fmt.Sprintf("%d (%d..%d)", len(g), g[0], g[len(g)-1])
}

// metaText renders meta as sorted key=value pairs, without the fields
// shown in their own columns.
func metaText(meta map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		if k == store.MetaStep || k == store.MetaSequence {
			continue
		}
		parts = append(parts, printable(k)+"="+printable(meta[k]))
	}
	return dash(strings.Join(parts, " "))
}

// printable quotes a string the task wrote (manifest meta) when it holds
// anything but printable characters without spaces, so it can neither
// forge columns nor send escape sequences to the operator's terminal.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' {
			return strconv.Quote(s)
		}
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
