//! settle client (see issue 3)
