"""A deploy judged against its own history: noise, change points, the rule per metric, the judge, the trend."""
