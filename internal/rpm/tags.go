package rpm

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"fmt"
	"hash"
)

// Tags of the signature header (rpm's include/rpm/rpmtag.h).
const (
	sigSize            = 1000 // header+payload, 32 bits
	sigLEMD5a          = 1001 // obsolete digests nothing checks
	sigPGP             = 1002 // RSA over header+payload
	sigLEMD5b          = 1003
	sigMD5             = 1004 // header+payload, binary
	sigGPG             = 1005 // DSA/ECDSA over header+payload
	sigPGP5            = 1006
	sigPayloadSize     = 1007 // uncompressed payload, 32 bits
	sigBadSHA1a        = 264
	sigBadSHA1b        = 265
	sigDSA             = 267 // DSA/ECDSA/EdDSA over the header
	sigRSA             = 268 // RSA over the header
	sigSHA1            = 269 // of the header, hex
	sigLongSize        = 270
	sigLongArchiveSize = 271
	sigSHA256          = 273 // of the header, hex
	sigFileSignatures  = 274 // IMA, per file
	sigVeritySigs      = 276 // fs-verity, per file
	sigOpenPGP         = 278 // rpm 6's OpenPGP signatures over the header
	sigSHA3_256        = 279 // of the header, hex
)

// Tags of the main header.
const (
	tagSize              = 1009 // installed size, 32 bits
	tagFileSizes         = 1028
	tagFileModes         = 1030
	tagFileDigests       = 1035
	tagFileFlags         = 1037
	tagOldFileNames      = 1027
	tagArchiveSize       = 1046
	tagFileDevices       = 1095
	tagFileInodes        = 1096
	tagDirIndexes        = 1116
	tagBaseNames         = 1117
	tagDirNames          = 1118
	tagPayloadFormat     = 1124
	tagPayloadCompressor = 1125
	tagPayloadFlags      = 1126
	tagLongFileSizes     = 5008
	tagLongSize          = 5009
	tagFileDigestAlgo    = 5011
	tagFileSignatures    = 5090 // IMA, per file
	tagPayloadDigest     = 5092 // of the compressed payload, hex
	tagPayloadDigestAlgo = 5093
	tagPayloadDigestAlt  = 5097 // of the uncompressed payload, hex
	tagPayloadSize       = 5112 // rpm 6: the compressed payload's size
	tagPayloadSizeAlt    = 5113 // rpm 6: the uncompressed payload's size
	tagPayloadSHA512     = 5121
	tagPayloadSHA512Alt  = 5122
	tagPayloadSHA3_256   = 5123
	tagPayloadSHA3Alt    = 5124
)

// signatureTags are the signature header's tags that a changed header
// (or payload) invalidates and that only the key's owner can make again:
// they are dropped.
var signatureTags = map[uint32]string{
	sigPGP: "PGP", sigGPG: "GPG", sigPGP5: "PGP5", sigDSA: "DSA", sigRSA: "RSA", sigOpenPGP: "OPENPGP",
	// Obsolete digests no rpm checks, which nothing here can make.
	sigLEMD5a: "LEMD5_1", sigLEMD5b: "LEMD5_2", sigBadSHA1a: "BADSHA1_1", sigBadSHA1b: "BADSHA1_2",
}

// fileFlagGhost marks a file the payload does not hold.
const fileFlagGhost = 1 << 6

// Hash algorithms, as rpm numbers them (OpenPGP's numbers).
const (
	hashMD5      = 1
	hashSHA1     = 2
	hashSHA256   = 8
	hashSHA384   = 9
	hashSHA512   = 10
	hashSHA224   = 11
	hashSHA3_256 = 12
	hashSHA3_512 = 14
)

// newHash is the hash of rpm's algorithm number algo.
func newHash(algo uint64) (hash.Hash, error) {
	switch algo {
	case hashMD5:
		return md5.New(), nil
	case hashSHA1:
		return sha1.New(), nil
	case hashSHA256:
		return sha256.New(), nil
	case hashSHA384:
		return sha512.New384(), nil
	case hashSHA512:
		return sha512.New(), nil
	case hashSHA224:
		return sha256.New224(), nil
	case hashSHA3_256:
		return sha3.New256(), nil
	case hashSHA3_512:
		return sha3.New512(), nil
	}
	return nil, fmt.Errorf("unknown digest algorithm %d", algo)
}
