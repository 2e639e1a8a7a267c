package protocol

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestMarker_RoundTripAndErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadMarker(dir)
	must.ErrorIs(t, err, ErrNoMarker)

	step := uint64(12)
	must.NoError(t, WriteMarker(dir, &Marker{Sequence: 3, Step: &step, Meta: map[string]string{"k": "v"}}))
	m, err := ReadMarker(dir)
	must.NoError(t, err)
	must.Eq(t, uint64(3), m.Sequence)
	must.Eq(t, step, *m.Step)
	must.Eq(t, "v", m.Meta["k"])
	ents, err := os.ReadDir(dir)
	must.NoError(t, err)
	must.SliceLen(t, 1, ents) // no temporary file left behind

	must.Error(t, WriteMarker(dir, &Marker{Sequence: 0}))

	cases := []struct{ name, content string }{
		{"not json", "{"},
		{"sequence zero", `{"sequence": 0}`},
		{"negative sequence", `{"sequence": -1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			must.NoError(t, os.WriteFile(filepath.Join(d, MarkerName), []byte(tc.content), 0o644))
			_, err := ReadMarker(d)
			must.Error(t, err)
		})
	}
}

// TestParseMarker_OrderingBounds: sequence and step, the fields that order a
// key's checkpoints, are integers within 1..MaxSequence and 0..MaxStep; a
// value out of bounds, negative, fractional or not a number is refused
// naming the field, and meta's look-alikes stay plain meta.
func TestParseMarker_OrderingBounds(t *testing.T) {
	cases := []struct {
		name, content, wantErr string
	}{
		{"largest allowed", `{"sequence": 9007199254740991, "step": 9007199254740991}`, ""},
		{"step 0", `{"sequence": 1, "step": 0}`, ""},
		{"step 2^64-1", `{"sequence": 1, "step": 18446744073709551615}`, "step: 18446744073709551615 is above the largest allowed, 9007199254740991"},
		{"step 2^53", `{"sequence": 1, "step": 9007199254740992}`, "step: 9007199254740992 is above"},
		{"sequence 2^64-1", `{"sequence": 18446744073709551615}`, "sequence: 18446744073709551615 is above"},
		{"both out of bounds", `{"sequence": 9007199254740992, "step": 9007199254740992}`, "sequence: 9007199254740992 is above the largest allowed, 9007199254740991\nstep: 9007199254740992"},
		{"sequence above 2^64", `{"sequence": 18446744073709551616}`, "Marker.sequence"},
		{"negative step", `{"sequence": 1, "step": -1}`, "Marker.step"},
		{"fractional step", `{"sequence": 1, "step": 2.5}`, "Marker.step"},
		{"exponent sequence", `{"sequence": 1e3}`, "Marker.sequence"},
		{"string step", `{"sequence": 1, "step": "7"}`, "Marker.step"},
		{"meta step is meta", `{"sequence": 2, "meta": {"step": "18446744073709551615"}}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMarker([]byte(tc.content))
			if tc.wantErr == "" {
				must.NoError(t, err)
				must.True(t, m.Step == nil || *m.Step <= MaxStep)
				return
			}
			must.ErrorContains(t, err, tc.wantErr)
		})
	}
	huge := uint64(MaxStep + 1)
	must.ErrorContains(t, WriteMarker(t.TempDir(), &Marker{Sequence: 1, Step: &huge}), "step: ")
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{
		EnvDir: "/ck", EnvSignal: "SIGUSR1", EnvGeneration: "4", EnvSequence: "9", EnvStep: "1200", EnvRestoredFrom: "client1",
	}
	r, err := FromEnv(func(k string) string { return env[k] })
	must.NoError(t, err)
	must.Eq(t, "/ck", r.Dir)
	must.Eq(t, uint64(4), r.Generation)
	must.Eq(t, uint64(9), r.Sequence)
	must.Eq(t, uint64(1200), *r.Step)
	must.Eq(t, "client1", r.FromNode)

	r, err = FromEnv(func(string) string { return "" })
	must.NoError(t, err)
	must.Eq(t, "", r.Dir)
	must.Nil(t, r.Step)

	for _, k := range []string{EnvGeneration, EnvSequence, EnvStep} {
		_, err := FromEnv(func(name string) string {
			if name == k {
				return "x"
			}
			return ""
		})
		must.ErrorContains(t, err, k)
	}
}

func TestMarker_Skip(t *testing.T) {
	dir := t.TempDir()
	must.NoError(t, WriteMarker(dir, &Marker{Sequence: 4, Skip: true}))
	b, err := os.ReadFile(filepath.Join(dir, MarkerName))
	must.NoError(t, err)
	must.Eq(t, `{"sequence":4,"skip":true}`, string(b))
	m, err := ReadMarker(dir)
	must.NoError(t, err)
	must.True(t, m.Skip)
	must.Nil(t, m.Step)

	must.NoError(t, WriteMarker(dir, &Marker{Sequence: 5}))
	b, err = os.ReadFile(filepath.Join(dir, MarkerName))
	must.NoError(t, err)
	must.Eq(t, `{"sequence":5}`, string(b), must.Sprint("skip is omitted when false"))
	must.Error(t, WriteMarker(dir, &Marker{Sequence: 0, Skip: true}))
}

// TestReadMarker_RefusesSpecialFiles: a marker the task made a symlink, a
// FIFO, a directory or a huge file is refused at once, unread.
func TestReadMarker_RefusesSpecialFiles(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "host-secret")
	must.NoError(t, os.WriteFile(secret, []byte(`{"sequence": 9, "meta": {"leak": "host bytes"}}`), 0o600))

	cases := []struct {
		name string
		make func(t *testing.T, p string)
		want error
	}{
		{"symlink to host file", func(t *testing.T, p string) { must.NoError(t, os.Symlink(secret, p)) }, ErrNotRegular},
		{"symlink inside", func(t *testing.T, p string) {
			must.NoError(t, os.WriteFile(p+".real", []byte(`{"sequence": 1}`), 0o644))
			must.NoError(t, os.Symlink(filepath.Base(p)+".real", p))
		}, ErrNotRegular},
		{"fifo", func(t *testing.T, p string) { must.NoError(t, syscall.Mkfifo(p, 0o644)) }, ErrNotRegular},
		{"directory", func(t *testing.T, p string) { must.NoError(t, os.Mkdir(p, 0o755)) }, ErrNotRegular},
		{"huge", func(t *testing.T, p string) {
			f, err := os.Create(p)
			must.NoError(t, err)
			must.NoError(t, f.Truncate(256<<20)) // sparse: costs no disk
			must.NoError(t, f.Close())
		}, ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			tc.make(t, filepath.Join(d, MarkerName))
			done := make(chan error, 1)
			go func() { _, err := ReadMarker(d); done <- err }()
			select {
			case err := <-done:
				must.ErrorIs(t, err, tc.want)
				must.StrNotContains(t, err.Error(), "host bytes")
			case <-time.After(10 * time.Second):
				t.Fatal("ReadMarker blocked")
			}
		})
	}
}

// FuzzParseMarker: any bytes give a valid marker or an error; never a
// panic. A marker that parses survives a write and read back unchanged.
func FuzzParseMarker(f *testing.F) {
	f.Add([]byte(`{"sequence": 7, "step": 12000, "meta": {"loss": "0.213"}}`))
	f.Add([]byte(`{"sequence": 0}`))
	f.Add([]byte(`{"sequence": 18446744073709551616}`))
	f.Add([]byte(`{"sequence": 1, "meta": {"a": 1}}`))
	// Ordering fields out of bounds, and meta that looks like them.
	f.Add([]byte(`{"sequence": 1, "step": 18446744073709551615}`))
	f.Add([]byte(`{"sequence": 18446744073709551615}`))
	f.Add([]byte(`{"sequence": 9007199254740992, "step": 9007199254740992}`))
	f.Add([]byte(`{"sequence": 9007199254740991, "step": 9007199254740991}`))
	f.Add([]byte(`{"sequence": 2, "meta": {"step": "18446744073709551615", "sequence": "99"}}`))
	f.Add([]byte(`{"sequence": 1, "step": -1}`))
	f.Add([]byte(`{"sequence": 1.5, "step": 2.0}`))
	f.Add([]byte(`{"sequence": 1e3, "step": 1e300}`))
	f.Add([]byte(`{"sequence": 1, "step": 1e400}`))
	f.Add([]byte(`{"sequence": "1", "step": "2"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMarker(b)
		if err != nil {
			return
		}
		if m.Sequence == 0 || m.Sequence > MaxSequence || (m.Step != nil && *m.Step > MaxStep) {
			t.Fatalf("accepted sequence %d, step %v", m.Sequence, m.Step)
		}
		dir := t.TempDir()
		if err := WriteMarker(dir, m); err != nil {
			t.Fatal(err)
		}
		back, err := ReadMarker(dir)
		if err != nil {
			t.Fatalf("written marker does not read back: %v", err)
		}
		if back.Sequence != m.Sequence {
			t.Fatalf("sequence %d read back as %d", m.Sequence, back.Sequence)
		}
	})
}
