/* The only place that selects the POSIX feature level (STYLE B4); include it first in any .c that
 * needs POSIX interfaces. */
#ifndef SM_CORE_SM_CONFIG_H
#define SM_CORE_SM_CONFIG_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#endif
