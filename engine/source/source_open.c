/* sm_source_open: the engine's file sources by input.format. Interim: the readers move here from
 * jobs/ and export/ in the next change; until then every format is refused. */
#include "source_int.h"

sm_status sm_source_open(const struct sm_source_params *p, struct sm_source **out,
                         struct sm_err *err)
{
    *out = NULL;
    sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "input.format %s is not readable yet",
               p->format != NULL ? p->format : "(none)");
    sm_err_where(err, "input.format");
    return err->status;
}
