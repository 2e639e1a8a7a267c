package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/caravan-nomad/caravan/internal/passwd"
)

// The restore role gives the checkpoint directory (and what it restores
// into it) the owner the main task runs as, so a container running as a
// non-root user can save into it. The owner is the task's effective
// uid:gid: its `user`, else, for a container, its image's USER, resolved
// in the image's own /etc/passwd and /etc/group (never the host's).

// ownerTimeout bounds asking the engine about an image (a pull of a
// missing image included).
const ownerTimeout = 5 * time.Minute

// containerDrivers are the task drivers whose tasks run an image through
// a Docker-compatible engine, with the plugin option naming its endpoint.
var containerDrivers = map[string]string{"docker": "docker_endpoint", "podman": "podman_endpoint"}

// taskOwner is a resolved owner; uid < 0 means leave ownership alone (root).
type taskOwner struct{ uid, gid int }

var rootOwner = taskOwner{-1, -1}

// errOwner marks a main task whose user could not be resolved.
var errOwner = errors.New("cannot resolve the user")

// mainTaskOwner resolves the owner of task's checkpoint directory.
func (d *Driver) mainTaskOwner(ctx context.Context, task *api.Task) (taskOwner, error) {
	field, container := containerDrivers[task.Driver]
	if !container {
		if task.User == "" {
			return rootOwner, nil
		}
		// A host process (exec, raw_exec, ...): the host's users.
		ids, err := passwd.LookupHost(task.User)
		if err != nil {
			return rootOwner, fmt.Errorf("checkpoint.task: %w task %q runs as (user %q): %w", errOwner, task.Name, task.User, err)
		}
		return ownerOf(ids), nil
	}
	image, _ := task.Config["image"].(string)
	image = strings.TrimPrefix(image, "docker://")
	spec, from := task.User, fmt.Sprintf("user %q", task.User)
	if spec == "" {
		from = "no user set"
	}
	fail := func(err error) (taskOwner, error) {
		return rootOwner, fmt.Errorf("checkpoint.task: %w task %q runs as (%s, image %q): %w", errOwner, task.Name, from, image, err)
	}
	if spec != "" && !passwd.NeedsFiles(spec) {
		ids, err := passwd.LookupIn(passwd.MapFiles{}, spec) // uid:gid, both numbers
		if err != nil {
			return fail(err)
		}
		return ownerOf(ids), nil
	}
	if !imageRef.MatchString(image) {
		return fail(errors.New("not an image reference the owner can be read from; set the task's user to a numeric uid:gid"))
	}
	endpoint := d.engineEndpoint(task.Driver)
	engine, err := newEngineClient(endpoint)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", field, err))
	}
	ctx, cancel := context.WithTimeout(ctx, ownerTimeout)
	defer cancel()
	imageUser, err := engine.imageUser(ctx, image)
	if errors.Is(err, errImageMissing) {
		if perr := engine.pullImage(ctx, image); perr != nil {
			return fail(fmt.Errorf("%w, and pulling it failed (%w); the image must be on the node before the restore task runs, or the task's user a numeric uid:gid", err, perr))
		}
		imageUser, err = engine.imageUser(ctx, image)
	}
	if err != nil {
		return fail(fmt.Errorf("%w (the plugin option %s names the engine the %s driver uses)", err, field, task.Driver))
	}
	if spec == "" {
		spec, from = imageUser, fmt.Sprintf("user %q, the image's USER", imageUser)
	}
	if spec == "" {
		return rootOwner, nil
	}
	if !passwd.NeedsFiles(spec) {
		ids, err := passwd.LookupIn(passwd.MapFiles{}, spec)
		if err != nil {
			return fail(err)
		}
		return ownerOf(ids), nil
	}
	files, err := engine.readImageFiles(ctx, image, "/etc/passwd", "/etc/group")
	if err != nil {
		return fail(err)
	}
	inImage := passwd.MapFiles{Label: "image " + image, Files: map[string][]byte{}}
	for p, b := range files {
		inImage.Files[strings.TrimPrefix(p, "/")] = b
	}
	ids, err := passwd.LookupIn(inImage, spec)
	if err != nil {
		return fail(err)
	}
	return ownerOf(ids), nil
}

func ownerOf(ids passwd.IDs) taskOwner {
	if ids.UID == 0 && ids.GID == 0 {
		return rootOwner
	}
	return taskOwner{ids.UID, ids.GID}
}

// engineEndpoint is the plugin's endpoint for a container driver's engine.
func (d *Driver) engineEndpoint(driver string) string {
	config, _ := d.getConfig()
	if driver == "podman" {
		if config.PodmanEndpoint != "" {
			return config.PodmanEndpoint
		}
		return defaultPodmanEndpoint
	}
	if config.DockerEndpoint != "" {
		return config.DockerEndpoint
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return defaultDockerEndpoint
}
