package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/engine"
)

// The partition's settings (today the trash's days) are configuration
// that changes how records apply: an unlink with the trash on keeps the
// file, with it off frees it. So they are state, not configuration read
// at start. A record carrying pb.Settings changes them; the checkpoint
// holds them; a server whose configured value differs from its state's
// logs a record with its own before it serves: the restart record of a
// single partition (recover.go), and the first proposal of a group's
// leader in each term (replicated_settings.go). Replay and every replica
// then apply each record with the value logged before it, whatever the
// replaying process was started with.

// applySettings applies the settings a record carries.
func (sm *stateMachine) applySettings(s *pb.Settings) {
	if int(s.TrashDays) != sm.eng.TrashDays() {
		sm.eng.SetTrashDays(int(s.TrashDays))
	}
}

// settingsFor returns the settings record's payload for configuration
// cfg if the state's settings differ from it, nil if they are the same.
func (sm *stateMachine) settingsFor(cfg *Config) *pb.Settings {
	want := configuredSettings(cfg)
	if int(want.TrashDays) == sm.eng.TrashDays() {
		return nil
	}
	return want
}

// configuredSettings returns the settings cfg asks for.
func configuredSettings(cfg *Config) *pb.Settings {
	return &pb.Settings{TrashDays: uint32(cfg.TrashDays)} // in range: Open checked it
}

// encodeSettings appends the settings to a checkpoint's tail (version 3).
func (sm *stateMachine) encodeSettings(tail *bytes.Buffer) {
	tail.Write(binary.AppendUvarint(nil, uint64(sm.eng.TrashDays())))
}

// decodeSettings reads what encodeSettings wrote.
func (sm *stateMachine) decodeSettings(br *bufio.Reader) error {
	days, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	if days > engine.MaxTrashDays {
		return fmt.Errorf("settings: %d trash days, more than %d", days, engine.MaxTrashDays)
	}
	sm.eng.SetTrashDays(int(days))
	return nil
}
