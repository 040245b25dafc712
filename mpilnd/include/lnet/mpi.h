/* LNet over MPI for C programs: lnet_mpi_init brings LNet up over a duplicate of the
 * communicator (collective, after MPI_Init), after which the classic API of lnet.h
 * (LNetMEAttach, LNetPut, LNetEQPoll, ...) works on it; lnet_mpi_fini (collective) ends
 * it. NIDs are <rank>@mpi<N>; every rank has the same pid (lnet_mpi_id). See lnet(3),
 * lnet-mpi(7) and lnet/mpi.hpp for the tunables (LNET_MPI_* variables). */
#ifndef LNET_MPI_H
#define LNET_MPI_H

#include <mpi.h>

#include <lnet/lnet.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0, or a negative errno (with a message on stderr); every rank gets the same answer. */
int lnet_mpi_init(MPI_Comm comm);
/* Waits for this rank's transfers and for every rank, then ends LNet. */
int lnet_mpi_fini(void);
/* The process id of `rank` on the MPI network (LNET_NID_ANY before lnet_mpi_init). */
struct lnet_process_id lnet_mpi_id(int rank);

#ifdef __cplusplus
}
#endif

#endif
