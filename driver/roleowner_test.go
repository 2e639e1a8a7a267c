package driver

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/helper/pointer"
	"github.com/shoenig/test/must"

	"github.com/caravan-nomad/caravan/driver/protocol"
)

// fakeImage is an image of fakeEngine: its USER and files (a value
// starting with "->" is a symlink to the rest).
type fakeImage struct {
	user  string
	files map[string]string
}

// fakeEngine serves the Docker-compatible API calls the restore role
// makes, on a unix socket.
type fakeEngine struct {
	endpoint string
	mu       sync.Mutex
	images   map[string]fakeImage
	pullable map[string]fakeImage // "name:tag" -> what a pull gets
	live     map[string]string    // container ID -> image
	calls    []string
	nextID   int
}

func newFakeEngine(t *testing.T, images map[string]fakeImage) *fakeEngine {
	t.Helper()
	dir, err := os.MkdirTemp("", "eng") // short: a socket path has at most 107 bytes
	must.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "e.sock")
	l, err := net.Listen("unix", sock)
	must.NoError(t, err)
	e := &fakeEngine{endpoint: "unix://" + sock, images: images, pullable: map[string]fakeImage{}, live: map[string]string{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(e.serve))
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return e
}

func (e *fakeEngine) serve(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, r.Method+" "+r.URL.Path)
	notFound := func(what string) {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "no such " + what})
	}
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/images/") && strings.HasSuffix(p, "/json"):
		img, ok := e.images[strings.TrimSuffix(strings.TrimPrefix(p, "/images/"), "/json")]
		if !ok {
			notFound("image")
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Config": map[string]any{"User": img.user}})
	case r.Method == http.MethodPost && p == "/images/create":
		ref := r.URL.Query().Get("fromImage") + ":" + r.URL.Query().Get("tag")
		img, ok := e.pullable[ref]
		if !ok {
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "pull access denied for " + ref})
			return
		}
		e.images[ref] = img
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "Downloaded newer image"})
	case r.Method == http.MethodPost && p == "/containers/create":
		var body struct{ Image string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		if _, ok := e.images[body.Image]; !ok {
			notFound("image")
			return
		}
		e.nextID++
		id := fmt.Sprintf("c%d", e.nextID)
		e.live[id] = body.Image
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"Id": id})
	case r.Method == http.MethodGet && strings.HasSuffix(p, "/archive"):
		img, ok := e.live[strings.TrimSuffix(strings.TrimPrefix(p, "/containers/"), "/archive")]
		if !ok {
			notFound("container")
			return
		}
		name := r.URL.Query().Get("path")
		content, ok := e.images[img].files[name]
		if !ok {
			notFound("file")
			return
		}
		tw := tar.NewWriter(w)
		if target, link := strings.CutPrefix(content, "->"); link {
			_ = tw.WriteHeader(&tar.Header{Name: filepath.Base(name), Typeflag: tar.TypeSymlink, Linkname: target})
		} else {
			_ = tw.WriteHeader(&tar.Header{Name: filepath.Base(name), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))})
			_, _ = tw.Write([]byte(content))
		}
		_ = tw.Close()
	case r.Method == http.MethodDelete && strings.HasPrefix(p, "/containers/"):
		delete(e.live, strings.TrimPrefix(p, "/containers/"))
		w.WriteHeader(http.StatusNoContent)
	default:
		notFound("route " + p)
	}
}

// leftContainers is how many probe containers were not removed.
func (e *fakeEngine) leftContainers() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.live)
}

const (
	imagePasswd = "root:x:0:0::/root:/bin/sh\ntrainer:x:4242:4343::/home/trainer:/bin/sh\n"
	imageGroup  = "root:x:0:\ntrainers:x:4343:\nvideo:x:44:\n"
)

func testImages() map[string]fakeImage {
	withUsers := map[string]string{"/etc/passwd": imagePasswd, "/etc/group": imageGroup}
	return map[string]fakeImage{
		"app:root":        {files: withUsers},
		"app:user":        {user: "trainer", files: withUsers},
		"app:uid":         {user: "4242", files: withUsers},
		"app:linked":      {user: "trainer", files: map[string]string{"/etc/passwd": "->../usr/lib/passwd", "/usr/lib/passwd": imagePasswd}},
		"scratch:1":       {},
		"scratch:ghost":   {user: "ghost"},
		"localhost/a/b:1": {user: "trainer:video", files: withUsers},
	}
}

// TestMainTaskOwner: the owner of a container task's checkpoint directory
// is its effective uid:gid, resolved from its user or its image's USER in
// the image's own passwd and group files; failures name the task and user.
func TestMainTaskOwner(t *testing.T) {
	eng := newFakeEngine(t, testImages())
	eng.pullable["registry.example/app:2"] = fakeImage{user: "4242"}
	d := newTestDriverWith(t, &Config{DockerEndpoint: eng.endpoint}).d
	docker := func(user, image string) *api.Task {
		return &api.Task{Name: "trainer", Driver: "docker", User: user, Config: map[string]any{"image": image}}
	}
	cases := []struct {
		name string
		task *api.Task
		want taskOwner
		err  []string
	}{
		{"root image", docker("", "app:root"), rootOwner, nil},
		{"image USER name", docker("", "app:user"), taskOwner{4242, 4343}, nil},
		{"image USER number, group from passwd", docker("", "app:uid"), taskOwner{4242, 4343}, nil},
		{"image USER name:group", docker("", "localhost/a/b:1"), taskOwner{4242, 44}, nil},
		{"passwd a symlink in the image", docker("", "app:linked"), taskOwner{4242, 4343}, nil},
		{"numeric user, no passwd", docker("65534", "scratch:1"), taskOwner{65534, 0}, nil},
		{"numeric user:group, no engine asked", docker("65534:65534", "not-there:1"), taskOwner{65534, 65534}, nil},
		{"task user overrides image USER", docker("65534", "app:user"), taskOwner{65534, 0}, nil},
		{"task user name", docker("trainer:video", "app:root"), taskOwner{4242, 44}, nil},
		{"user root by name", docker("root", "app:user"), rootOwner, nil},
		{"missing image pulled", docker("", "registry.example/app:2"), taskOwner{4242, 0}, nil},
		{"unknown user", docker("ghost", "app:root"), rootOwner,
			[]string{`the user task "trainer" runs as (user "ghost", image "app:root")`, "no such user in image app:root /etc/passwd"}},
		{"image USER unknown, no passwd", docker("", "scratch:ghost"), rootOwner,
			[]string{`(user "ghost", the image's USER, image "scratch:ghost")`, "image scratch:ghost /etc/passwd"}},
		{"image missing, pull refused", docker("trainer", "private/app:1"), rootOwner,
			[]string{`task "trainer" runs as (user "trainer", image "private/app:1")`, "pull access denied", "numeric uid:gid"}},
		{"not an image reference", docker("trainer", "app?x=1"), rootOwner, []string{"numeric uid:gid"}},
		{"host task user", &api.Task{Name: "h", Driver: "raw_exec", User: "65534:7"}, taskOwner{65534, 7}, nil},
		{"host task as the agent", &api.Task{Name: "h", Driver: "raw_exec"}, rootOwner, nil},
		{"host task unknown user", &api.Task{Name: "h", Driver: "exec", User: "no-such-user-caravan"}, rootOwner,
			[]string{`task "h" runs as (user "no-such-user-caravan")`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := d.mainTaskOwner(t.Context(), c.task)
			if c.err != nil {
				must.ErrorIs(t, err, errOwner)
				must.StrContains(t, err.Error(), "checkpoint.task: ")
				for _, w := range c.err {
					must.StrContains(t, err.Error(), w)
				}
				return
			}
			must.NoError(t, err)
			must.Eq(t, c.want, got)
		})
	}
	must.Zero(t, eng.leftContainers())
}

// TestMainTaskOwner_EngineUnreachable: an engine that does not answer
// fails the resolution, naming the plugin option.
func TestMainTaskOwner_EngineUnreachable(t *testing.T) {
	d := newTestDriverWith(t, &Config{PodmanEndpoint: "unix:///nonexistent/podman.sock"}).d
	_, err := d.mainTaskOwner(t.Context(), &api.Task{Name: "trainer", Driver: "podman", Config: map[string]any{"image": "app:1"}})
	must.ErrorIs(t, err, errOwner)
	must.StrContains(t, err.Error(), "podman_endpoint")
	must.StrContains(t, err.Error(), "unix:///nonexistent/podman.sock")
}

// ownerRoleJob is job "train" whose group "g" has main task main, the restore
// task "t" (newTask's name) and the commit task "commit".
func ownerRoleJob(main *api.Task) *api.Job {
	return &api.Job{ID: pointer.Of("train"), Name: pointer.Of("train"), TaskGroups: []*api.TaskGroup{{
		Name: pointer.Of("g"),
		Tasks: []*api.Task{main,
			{Name: "t", Driver: PluginName, Lifecycle: &api.TaskLifecycle{Hook: api.TaskLifecycleHookPrestart}},
			{Name: "commit", Driver: PluginName, Lifecycle: &api.TaskLifecycle{Hook: api.TaskLifecycleHookPoststop}},
		},
	}}}
}

func ownerOfPath(t *testing.T, p string) taskOwner {
	t.Helper()
	fi, err := os.Lstat(p)
	must.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	return taskOwner{int(st.Uid), int(st.Gid)}
}

// TestDriver_RoleRestoreOwnsDirForNonRootContainer: the restore role gives
// alloc/checkpoint, fresh and restored (its files and subdirectories too),
// the owner of the container it serves: a task user, or the image's USER
// resolved in the image. On the old code it stayed root's.
func TestDriver_RoleRestoreOwnsDirForNonRootContainer(t *testing.T) {
	for _, c := range []struct {
		name, user, image string
		want              taskOwner
	}{
		{"numeric user", "65534", "scratch:1", taskOwner{65534, 0}},
		{"image USER", "", "app:user", taskOwner{4242, 4343}},
	} {
		t.Run(c.name, func(t *testing.T) {
			eng := newFakeEngine(t, testImages())
			td := newTestDriverWith(t, &Config{CheckpointStore: t.TempDir(), DockerEndpoint: eng.endpoint})
			td.nomad.job.Store(ownerRoleJob(&api.Task{Name: "trainer", Driver: "docker", User: c.user,
				Config: map[string]any{"image": c.image}}))

			restore1 := newTask(t, td, "client1", roleTask(RoleRestore))
			_, _, err := td.StartTask(restore1)
			must.NoError(t, err)
			td.waitEvent(t, "No checkpoint under default/train@1/g/trainer/0")
			dir := filepath.Join(restore1.TaskDir().SharedAllocDir, "checkpoint")
			must.Eq(t, c.want, ownerOfPath(t, dir))

			// The container saves as its user (root writes here, then
			// gives the files the owner the container would).
			must.NoError(t, os.MkdirAll(filepath.Join(dir, "shards"), 0o755))
			must.NoError(t, os.WriteFile(filepath.Join(dir, "shards", "w.bin"), []byte("weights"), 0o644))
			must.NoError(t, protocol.WriteMarker(dir, &protocol.Marker{Sequence: 1}))
			commit := sameAllocTask(t, restore1, "commit", roleTask(RoleCommit))
			_, _, err = td.StartTask(commit)
			must.NoError(t, err)
			td.waitEvent(t, "Checkpoint saved (exit): generation 1")

			restore2 := newTask(t, td, "client2", roleTask(RoleRestore))
			_, _, err = td.StartTask(restore2)
			must.NoError(t, err)
			td.waitEvent(t, "Checkpoint restored: generation 1")
			dir2 := filepath.Join(restore2.TaskDir().SharedAllocDir, "checkpoint")
			for _, p := range []string{"", "shards", "shards/w.bin", protocol.MarkerName} {
				must.Eq(t, c.want, ownerOfPath(t, filepath.Join(dir2, p)), must.Sprint(p))
			}
			b, err := os.ReadFile(filepath.Join(dir2, "shards", "w.bin"))
			must.NoError(t, err)
			must.Eq(t, "weights", string(b))
			must.Zero(t, eng.leftContainers())
		})
	}
}

// TestDriver_RoleRestoreFailsOnUnresolvableUser: a user the image does not
// know fails the restore before the main task starts, naming the task and
// the user, and restores nothing.
func TestDriver_RoleRestoreFailsOnUnresolvableUser(t *testing.T) {
	eng := newFakeEngine(t, testImages())
	td := newTestDriverWith(t, &Config{CheckpointStore: t.TempDir(), DockerEndpoint: eng.endpoint})
	td.nomad.job.Store(ownerRoleJob(&api.Task{Name: "trainer", Driver: "docker", User: "ghost",
		Config: map[string]any{"image": "app:root"}}))
	restore := newTask(t, td, "client1", roleTask(RoleRestore))
	_, _, err := td.StartTask(restore)
	must.StrContains(t, err.Error(), `checkpoint.task: cannot resolve the user task "trainer" runs as (user "ghost", image "app:root")`)
	_, err = os.Lstat(filepath.Join(restore.TaskDir().SharedAllocDir, "checkpoint"))
	must.ErrorIs(t, err, os.ErrNotExist)
}
