# Runs `mpirun -np 2 loom_dist_fault MODE [TIMEOUT]` (rank 1 fails at step 3) and checks that the
# job ends within BOUND seconds, with the exit status EXIT_STATUS and output matching EXPECT.
#   cmake -DMPIEXEC=mpirun -DPROGRAM=loom_dist_fault -DMODE=kill [-DCOLLECTIVE_TIMEOUT=5]
#         -DBOUND=30 -DEXIT_STATUS=137 -DEXPECT=regex -P run_fault.cmake
string(TIMESTAMP start "%s" UTC)
math(EXPR mpirun_timeout "${BOUND} + 10")
execute_process(
  COMMAND ${MPIEXEC} --oversubscribe --timeout ${mpirun_timeout} -np 2 ${PROGRAM} ${MODE} ${COLLECTIVE_TIMEOUT}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT ${BOUND})
string(TIMESTAMP end "%s" UTC)
math(EXPR took "${end} - ${start}")
message("--- mode ${MODE}: exit status '${status}' after ${took} s; output:\n${out}---")
if(NOT status STREQUAL "${EXIT_STATUS}")
  message(FATAL_ERROR "mode ${MODE}: the job ended with '${status}', expected exit status ${EXIT_STATUS} within ${BOUND} s")
endif()
if(took GREATER BOUND)
  message(FATAL_ERROR "mode ${MODE}: the job took ${took} s, more than ${BOUND} s")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "mode ${MODE}: the output does not match '${EXPECT}'")
endif()
