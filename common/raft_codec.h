/*
 * raft_codec.h — a Raft message (libraft 0.15's struct raft_message) to
 * and from the bytes libraft's own TCP transport writes for it, the
 * layout raft_frame.h describes and checks.
 *
 * The node transport of docs/DESIGN.md §6.5 (step 2) carries whole
 * messages between nodes, many groups on one connection, instead of
 * relaying libraft's byte streams. It takes a message from the guard's
 * send (raft_io_guard.h), encodes it here, and where it arrives checks the
 * bytes with raft_frame_message, as every peer's bytes are checked today,
 * before decoding them here into the message libraft's receive callback
 * gets. Encoding as libraft does is what lets that check run unchanged.
 *
 * libraft's own encoder and decoder (src/uv_encoding.c) are internal to
 * it; the configuration inside an InstallSnapshot is encoded with its
 * public raft_configuration_encode.
 */
#ifndef PC_RAFT_CODEC_H
#define PC_RAFT_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include <raft.h>

#include "raft_frame.h"

/* The bytes of m (preamble, header, then the payload: an AppendEntries'
 * entries, an InstallSnapshot's image) in one malloc'd buffer, *out of
 * *len bytes. m's server_id and server_address are not part of them.
 * 0, or -1 with why: an unknown type, an entry libraft would not send
 * (empty, or not a multiple of 8 bytes: raft_frame.h), out of memory. */
int raft_codec_encode(const struct raft_message *m, uint8_t **out, size_t *len,
                      const char **why);

/* The one message that is all of buf[0..len), if raft_frame_message
 * passes it under lim: *m as libraft's receive path builds it: an
 * AppendEntries' entries in a raft_malloc'd array whose data lie in one
 * raft_malloc'd batch (each entry's batch), an InstallSnapshot's
 * configuration decoded and its image in a raft_malloc'd buffer. Whoever
 * receives *m owns these; server_id and server_address are the
 * caller's to set. 0, or -1 with why (static text): refused by the
 * check, not exactly one message, out of memory. */
int raft_codec_decode(const uint8_t *buf, size_t len, const raft_frame_limits *lim,
                      struct raft_message *m, const char **why);

/* Free what raft_codec_decode allocated in m (a message no one took). */
void raft_codec_free(struct raft_message *m);

#endif
