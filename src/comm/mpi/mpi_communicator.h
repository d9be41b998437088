// MPI backend: the same cdt::Communicator over MPI (Debian libopenmpi-dev), so workers run
// unchanged under mpirun / srun on an HPC cluster. Built only when CMake finds MPI (CDT_HAVE_MPI).
//
// Differences from the TCP backend, by design:
//  * operations run to completion on the calling thread (MPI progress is the library's business);
//    the returned Work is already complete;
//  * the allreduce algorithm is MPI's own choice (AllreduceOptions::algorithm is ignored);
//  * failure handling is MPI's: MPI_ERRORS_RETURN is set and any MPI error is thrown as
//    cdt::Error(kPeerLost) naming the operation; Abort() calls MPI_Abort (MPI cannot rebuild a
//    communicator without ULFM, which Open MPI 4.1 in Debian does not enable by default).
// f16 / bf16 are reduced in float32 precision through user-defined MPI operations.
#pragma once

#include <memory>

#include "cdt/communicator.h"

namespace cdt {

// Calls MPI_Init_thread if MPI is not yet initialised (and MPI_Finalize at exit of the last
// communicator created this way). host_id is used to group ranks into nodes for layout().
std::unique_ptr<Communicator> CreateMpiCommunicator();

}  // namespace cdt
