package pcie

import "encoding/binary"

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
