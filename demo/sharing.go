package demo

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// SharingResult is where the two fractional jobs landed.
type SharingResult struct {
	// Jobs maps each job to its node, GPU and share IDs.
	Jobs map[string]Placement
	// SameGPU is true when both jobs got their shares from one GPU.
	SameGPU bool
}

// Placement is one allocation's node and GPU shares.
type Placement struct {
	AllocID string
	Node    string
	GPU     string
	Shares  []string
}

// shareSuffix separates a GPU's UUID from the share index in a device
// instance ID (device/README.md: "<UUID>-share-<i>").
const shareSuffix = "-share-"

// sharing runs jobspecs/gpu-fraction.nomad.hcl twice on client1, each job
// asking for 2 of a GPU's 4 shares, and shows that both land on one GPU.
func (d *Demo) sharing(ctx context.Context) (SharingResult, error) {
	res := SharingResult{Jobs: map[string]Placement{}}
	names := []string{"share-a", "share-b"}
	for _, name := range names {
		if _, err := d.c.Submit(ctx, "jobspecs/gpu-fraction.nomad.hcl",
			"job_name="+name, "shares=2", "node=client1"); err != nil {
			return res, err
		}
	}
	for _, name := range names {
		running, err := d.c.WaitRunning(ctx, name, 1, 2*time.Minute)
		if err != nil {
			return res, err
		}
		alloc, _, err := d.c.Nomad.Allocations().Info(running[0].ID, nil)
		if err != nil {
			return res, err
		}
		p := Placement{AllocID: alloc.ID, Node: alloc.NodeName}
		for _, tr := range alloc.AllocatedResources.Tasks {
			for _, dev := range tr.Devices {
				for _, id := range dev.DeviceIDs {
					gpu, _, ok := strings.Cut(id, shareSuffix)
					if !ok {
						return res, fmt.Errorf("device instance %q is not a caravan GPU share", id)
					}
					p.GPU = gpu
					p.Shares = append(p.Shares, id)
				}
			}
		}
		sort.Strings(p.Shares)
		res.Jobs[name] = p
		d.say("%s: %s, GPU %s, shares %s", name, p.Node, p.GPU, shareIndexes(p.Shares))
	}
	res.SameGPU = res.Jobs["share-a"].GPU != "" && res.Jobs["share-a"].GPU == res.Jobs["share-b"].GPU
	if res.SameGPU {
		d.say("share-a and share-b share one physical GPU, each limited to half its memory and compute")
	} else {
		d.say("share-a and share-b landed on different GPUs")
	}
	env, err := d.c.Logs(ctx, res.Jobs["share-a"].AllocID, "worker", false)
	if err == nil {
		for _, line := range strings.Split(env, "\n") {
			if strings.HasPrefix(line, "CUDA_VISIBLE_DEVICES=") || strings.HasPrefix(line, "CUDA_MPS_") {
				d.say("share-a sees %s", line)
			}
		}
	}
	for _, name := range names {
		if _, _, err := d.c.Nomad.Jobs().Deregister(name, true, nil); err != nil {
			return res, err
		}
	}
	return res, nil
}

func shareIndexes(ids []string) string {
	var idx []string
	for _, id := range ids {
		_, i, _ := strings.Cut(id, shareSuffix)
		idx = append(idx, i)
	}
	return "[" + strings.Join(idx, " ") + "]"
}
